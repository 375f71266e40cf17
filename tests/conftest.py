"""Shared pytest wiring: real PostgreSQL / SQLite stores and the real-Kafka lab."""

pytest_plugins = [
    "tests.fixtures.databases",
    "txnwatch.lab.pytest_plugin",
]
