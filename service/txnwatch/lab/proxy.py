"""A small TCP proxy in front of each broker's client listener, for latency and connection-loss faults.

Brokers advertise the proxy's port, so every client byte (metadata, produce,
fetch, coordinator traffic) goes through it, while replication and controller
traffic use the brokers' internal listener and stay unaffected.  Delay is a
per-chunk due time rather than a sleep in the read loop, so added latency does
not also throttle throughput.  Controlled over a line-oriented JSON socket so
the CLI, tests and the demo can all drive one proxy process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import socket
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ProxyRoute:
    node_id: int
    listen_port: int
    target_port: int
    delay_ms: float = 0.0
    blocked: bool = False
    connections: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = field(default_factory=set)
    server: asyncio.AbstractServer | None = None

    def describe(self) -> dict[str, Any]:
        return {"node_id": self.node_id, "listen_port": self.listen_port, "target_port": self.target_port,
                "delay_ms": self.delay_ms, "blocked": self.blocked, "connections": len(self.connections),
                "listening": self.server is not None}


class Proxy:
    def __init__(self, routes: list[ProxyRoute], control_port: int) -> None:
        self.routes = {r.node_id: r for r in routes}
        self.control_port = control_port
        self._stop = asyncio.Event()

    def stop(self) -> None:
        """Thread-safe only via loop.call_soon_threadsafe(proxy.stop)."""
        self._stop.set()

    async def serve(self, install_signal_handlers: bool = True) -> None:
        control = await asyncio.start_server(self._control, "127.0.0.1", self.control_port, reuse_address=True)
        if install_signal_handlers:  # only possible on the main thread, i.e. as `python -m txnwatch.lab.proxy`
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, self._stop.set)
        followers = [asyncio.ensure_future(self._follow_target(route)) for route in self.routes.values()]
        print(f"proxy ready: {[r.describe() for r in self.routes.values()]}", flush=True)
        await self._stop.wait()
        for follower in followers:
            follower.cancel()
        await asyncio.gather(*followers, return_exceptions=True)
        control.close()
        for route in self.routes.values():
            if route.server is not None:
                route.server.close()
                route.server = None
            self._cut(route)

    async def _follow_target(self, route: ProxyRoute, interval: float = 0.2) -> None:
        """Listen only while the broker does.  A stopped broker must look stopped to clients
        (connection refused), not like a listener that accepts and then resets every connection."""
        while True:
            up = await _reachable(route.target_port)
            if up and route.server is None:
                try:
                    route.server = await asyncio.start_server(lambda r, w: self._handle(route, r, w),
                                                              "127.0.0.1", route.listen_port, reuse_address=True)
                except OSError as exc:
                    print(f"proxy: cannot listen on {route.listen_port} for node {route.node_id}: {exc}", flush=True)
            elif not up and route.server is not None:
                route.server.close()
                route.server = None
                self._cut(route)
            await asyncio.sleep(interval)

    async def _handle(self, route: ProxyRoute, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        if route.blocked:
            _abort(client_w)
            return
        try:
            broker_r, broker_w = await asyncio.open_connection("127.0.0.1", route.target_port)
        except OSError:
            _abort(client_w)
            return
        pair = (client_w, broker_w)
        route.connections.add(pair)
        try:
            await asyncio.gather(self._pump(route, client_r, broker_w), self._pump(route, broker_r, client_w))
        finally:
            route.connections.discard(pair)
            _abort(client_w)
            _abort(broker_w)

    @staticmethod
    async def _pump(route: ProxyRoute, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes | None]] = asyncio.Queue()

        async def deliver() -> None:
            while True:
                due, data = await queue.get()
                if data is None:
                    return
                wait = due - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                writer.write(data)
                await writer.drain()

        sender = asyncio.ensure_future(deliver())
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                await queue.put((loop.time() + route.delay_ms / 1000.0, data))
            await queue.put((0.0, None))
            await sender
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            sender.cancel()
            _abort(writer)

    @staticmethod
    def _cut(route: ProxyRoute) -> int:
        cut = 0
        for client_w, broker_w in list(route.connections):
            _abort(client_w)
            _abort(broker_w)
            cut += 1
        route.connections.clear()
        return cut

    async def _control(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while line := await reader.readline():
                try:
                    reply = self._command(json.loads(line))
                except Exception as exc:  # a bad command must not kill the proxy
                    reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
                writer.write(json.dumps(reply).encode() + b"\n")
                await writer.drain()
        finally:
            writer.close()

    def _command(self, cmd: dict[str, Any]) -> dict[str, Any]:
        op = cmd["op"]
        node = cmd.get("node")
        targets = list(self.routes.values()) if node is None else [self.routes[int(node)]]
        if op == "delay":
            for r in targets:
                r.delay_ms = float(cmd["ms"])
        elif op == "cut":
            cut = sum(self._cut(r) for r in targets)
            for r in targets:
                r.blocked = bool(cmd.get("block", False))
            return {"ok": True, "cut": cut}
        elif op == "clear":
            for r in targets:
                r.delay_ms, r.blocked = 0.0, False
        elif op != "status":
            raise ValueError(f"unknown op {op!r}")
        return {"ok": True, "routes": [r.describe() for r in self.routes.values()]}


async def _reachable(port: int) -> bool:
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), timeout=1.0)
    except (TimeoutError, OSError):
        return False
    _abort(writer)
    return True


def _abort(writer: asyncio.StreamWriter) -> None:
    transport = writer.transport
    if transport is not None and not transport.is_closing():
        transport.abort()


class ProxyControl:
    """Client for a running proxy's control socket."""

    def __init__(self, control_port: int, timeout: float = 5.0) -> None:
        self.control_port = control_port
        self.timeout = timeout

    def _call(self, **cmd: Any) -> dict[str, Any]:
        with socket.create_connection(("127.0.0.1", self.control_port), timeout=self.timeout) as sock:
            sock.sendall(json.dumps(cmd).encode() + b"\n")
            reply = json.loads(sock.makefile("rb").readline())
        if not reply.get("ok"):
            raise RuntimeError(f"proxy refused {cmd}: {reply.get('error')}")
        return reply

    def delay(self, node_id: int | None, ms: float) -> dict[str, Any]:
        """Add `ms` of one-way latency to every chunk through broker `node_id` (None: all brokers)."""
        return self._call(op="delay", node=node_id, ms=ms)

    def cut(self, node_id: int | None, block: bool = False) -> dict[str, Any]:
        """Abort open client connections to the broker; with `block`, refuse new ones until cleared."""
        return self._call(op="cut", node=node_id, block=block)

    def clear(self, node_id: int | None = None) -> dict[str, Any]:
        return self._call(op="clear", node=node_id)

    def status(self) -> dict[str, Any]:
        return self._call(op="status")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="txnwatch lab TCP proxy")
    parser.add_argument("--control-port", type=int, required=True)
    parser.add_argument("--route", action="append", default=[], help="NODE=LISTEN:TARGET")
    parser.add_argument("--lab-dir", help="owning lab; lets `lab down` recognise this process by its cmdline")
    args = parser.parse_args(argv)
    routes = []
    for spec in args.route:
        node, ports = spec.split("=")
        listen, target = ports.split(":")
        routes.append(ProxyRoute(int(node), int(listen), int(target)))
    asyncio.run(Proxy(routes, args.control_port).serve())


if __name__ == "__main__":
    main()
