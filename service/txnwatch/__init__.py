"""txnwatch: observability and alerting for Apache Kafka transactions."""

__version__ = "0.1.0"
