"""txnwatch: observability and alerting for Apache Kafka transactions."""

#: The one source of the version: pyproject.toml reads it for the wheel, scripts/build-image.sh for the image tag,
#: and helm/txnwatch/Chart.yaml repeats it (docs/releasing.md; tests/unit/test_packaging.py holds them equal).
__version__ = "0.2.0"
