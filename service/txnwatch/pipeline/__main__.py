"""`python -m txnwatch.pipeline …`, and the file spark-submit is given in cluster mode."""

from txnwatch.pipeline.cli import app

if __name__ == "__main__":
    app()
