"""The `txnwatch` command."""

import typer

app = typer.Typer(no_args_is_help=True, help="Observability and alerting for Apache Kafka transactions.")


@app.command()
def version() -> None:
    """Print the version."""
    from txnwatch import __version__

    typer.echo(__version__)


def main() -> None:
    app()
