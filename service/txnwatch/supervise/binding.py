"""The daemon's ports, taken first, and the one error a start-up step raises to stop the start.

Why first: a port in use is told at once, with its own exit code, instead of after the database and Kafka
have been opened (uvicorn alone would exit 3, like an unreachable cluster).
"""

from __future__ import annotations

import socket

from txnwatch.core import exitcodes
from txnwatch.core.redact import redact


class StartupError(Exception):
    """The daemon cannot start; the command turns it into one line on stderr and ``exit_code`` (URL passwords
    masked: the reason often quotes a driver's error)."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(redact(message))
        self.exit_code = exit_code


def bind(host: str, port: int) -> socket.socket:
    """Take the API's port first, before the database and Kafka: a port in use is told at once, with its own
    exit code, instead of after the start-up work (uvicorn alone would exit 3, like an unreachable cluster)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise StartupError(f"api.host {host!r} cannot be resolved: {exc.strerror}", exitcodes.USAGE) from exc
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise StartupError(f"cannot listen on {host}:{port}: {exc.strerror or exc}; another process may hold the "
                           f"port: choose another with --port, api.port or TXNWATCH_API__PORT",
                           exitcodes.PORT_UNAVAILABLE) from exc
    return sock
