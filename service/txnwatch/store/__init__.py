"""Persistence: SQLAlchemy models, engines, migrations and repository functions."""
