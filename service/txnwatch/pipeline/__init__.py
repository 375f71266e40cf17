"""PySpark rollups over the Parquet history archive (see docs/pipeline.md)."""
