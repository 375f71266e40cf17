"""The HTTP server's main loop wakes once a second, not ten times (issue 25), and still stops at once on a signal."""

from __future__ import annotations

import signal
import socket
import threading
import time
from typing import Any

import httpx

from txnwatch.serve.http_limits import HttpLimits, make_server


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"ok"})


def test_the_idle_server_ticks_once_a_second_answers_and_stops_at_once_on_a_signal() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    server = make_server(_app, HttpLimits(max_connections=50, read_timeout_s=5, keep_alive_timeout_s=5), http="h11", loop="asyncio", lifespan="off")
    ticks: list[float] = []
    on_tick = server.on_tick

    async def counted(counter: int) -> bool:
        ticks.append(time.monotonic())
        return bool(await on_tick(counter))

    server.on_tick = counted
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.started
    first = len(ticks)
    time.sleep(2.2)
    assert 1 <= len(ticks) - first <= 3  # uvicorn's own loop: ~22 ticks (a starved thread may miss one)
    response = httpx.get(f"http://127.0.0.1:{port}/")
    assert response.status_code == 200 and "date" in response.headers
    asked = time.monotonic()
    server.handle_exit(signal.SIGTERM, None)
    thread.join(timeout=10)
    assert not thread.is_alive()
    assert time.monotonic() - asked < 0.8  # not held until the next tick
