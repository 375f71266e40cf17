"""Errors the lab raises, with messages that tell the user what to do next."""

from __future__ import annotations


class LabError(RuntimeError):
    """Anything that keeps the lab from doing its job (missing tools, brokers that never answer)."""


class ToolMissingError(LabError):
    """Java or Maven is not installed; the message names the Debian packages to install."""

    def __init__(self, tool: str) -> None:
        super().__init__(
            f"`{tool}` was not found on PATH. The lab runs real Apache Kafka brokers and resolves their jars "
            "with Maven; install both with: apt-get install openjdk-17-jre-headless maven"
        )
