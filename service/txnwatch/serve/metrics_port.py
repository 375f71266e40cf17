"""The metrics port: a process of the standard library only that serves the collector's latest /metrics render.

Why a process: a poll of a big cluster, its detection and the render hold the daemon's GIL for seconds,
and a scrape answered by that interpreter waits for it (issue 25: p99 142–718 ms at 49k series on the
default ``api.workers: 0``).  API workers fix that but import the whole application (~107 MB each).  The
bytes a scrape needs are already rendered once per poll and written to a file by the collector
(``metrics.gz``, txnwatch.runtime.publication), so this process only reads that file when it changes and
sends it: it imports no txnwatch module and no third-party library, and runs ``python -I -S`` (no site
packages): ~11 MB of RSS, ~5 MB of it its own (PSS).

It is started and restarted by txnwatch.supervise.metrics_process, which binds the port and hands over the
listening socket (``--fd``), and reads the read token and the limits from stdin (never on the command
line, which every local user can read).  It exits when its parent is gone (``PR_SET_PDEATHSIG``, and
the parent pid checked once a second where prctl is not available).

The API's HTTP limits (txnwatch.serve.http_limits) hold here as well: a request head must arrive within
``read_timeout_s`` of the connection opening or of its first byte on a kept-alive connection; an idle
kept-alive connection is closed after ``keep_alive_s``; at ``max_connections`` the connection that has
waited longest without a response in flight is closed for the newcomer (the newcomer is refused when none
waits); a request head above ``max_head_bytes``, with more than ``max_header_fields`` fields or a URL above
``max_url_bytes`` is answered 431 (414 for the URL) and the connection closed (txnwatch.serve.request_head, the
same settings: ``api.max_request_*``); and a response that
the client does not take within ``SEND_TIMEOUT_S`` is dropped.  Failed bearer tokens are counted per
client (IPv6 per /64) in fixed windows, answered 429 past the limit like the API's doors
(txnwatch.serve.api.throttle), and reported to the parent one line each (``read refused``, ``read
throttled``), which adds them to ``txnwatch_auth_failures_total``.

Only GET and HEAD of ``/metrics`` (and ``/healthz``, for probes) are served; everything else is a 404.
One thread, non-blocking sockets and ``selectors``: a scrape costs a ``stat`` and a ``send``.
"""

from __future__ import annotations

import errno
import os
import selectors
import signal
import socket
import sys
import time
import zlib
from _operator import _compare_digest as compare_digest  # hmac's own: hmac would load OpenSSL (+3 MB RSS)
from collections import OrderedDict

MAX_HEAD_BYTES = 16 * 1024  # txnwatch.serve.request_head's defaults, when the parent does not say
MAX_HEADER_FIELDS = 100
MAX_URL_BYTES = 8 * 1024
SEND_TIMEOUT_S = 60.0
MAX_CLIENTS = 10_000
TICK_S = 1.0
WAKEUP = object()  # the selector key's data of the signal wake-up socket (None is the listener's)
METRICS_GZ = "metrics.gz"  # txnwatch.runtime.publication.METRICS_GZ (this module imports nothing of txnwatch)
SECURITY_HEADERS = (b"X-Content-Type-Options: nosniff\r\nX-Frame-Options: DENY\r\nReferrer-Policy: no-referrer\r\n"
                    b"Cache-Control: no-store\r\n")
_PR_SET_PDEATHSIG = 1


def accepts_gzip(accept_encoding: str | None) -> bool:
    """RFC 9110 content coding negotiation, enough for scrapers: ``gzip`` (or ``*``) listed without ``q=0``.

    Defined here, in the module that may import nothing of txnwatch, and used by the API's /metrics route too."""
    for item in (accept_encoding or "").split(","):
        coding, _, params = item.strip().partition(";")
        if coding.strip().lower() in ("gzip", "x-gzip", "*"):
            q = params.strip().lower().removeprefix("q=")
            try:
                return not params.strip() or float(q) > 0
            except ValueError:
                return True
    return False


def client_key(host: str) -> str:
    """IPv4 as it is, IPv6 by its /64 (txnwatch.serve.api.throttle.client_key), without the ipaddress module."""
    if ":" not in host:
        return host
    if host.startswith("::ffff:") and "." in host:
        return host[7:]
    try:
        packed = socket.inet_pton(socket.AF_INET6, host)
    except OSError:
        return host[:64]
    return socket.inet_ntop(socket.AF_INET6, packed[:8] + bytes(8)) + "/64"


class Throttle:
    """Failed tokens per client in fixed windows; at most MAX_CLIENTS windows kept (oldest failure evicted)."""

    def __init__(self, limit: int, window_s: float) -> None:
        self.limit, self.window_s = limit, window_s
        self._windows: OrderedDict[str, list[float]] = OrderedDict()  # client -> [start, failures]

    def blocked(self, client: str, now: float) -> int | None:
        window = self._windows.get(client)
        if window is None or now - window[0] >= self.window_s or window[1] < self.limit:
            return None
        return max(1, int(window[0] + self.window_s - now + 0.999))

    def fail(self, client: str, now: float) -> None:
        window = self._windows.pop(client, None)
        if window is None or now - window[0] >= self.window_s:
            window = [now, 0.0]
        window[1] += 1
        self._windows[client] = window
        while len(self._windows) > MAX_CLIENTS:
            self._windows.popitem(last=False)


class Body:
    """The latest published render: re-read when the file changed (one ``stat`` per scrape)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._seen: tuple[int, int] | None = None
        self.gzip: bytes | None = None
        self._text: bytes | None = None

    def refresh(self) -> None:
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            return
        key = (stat.st_ino, stat.st_mtime_ns)
        if key != self._seen:
            try:
                with open(self.path, "rb") as file:
                    self.gzip = file.read()
            except FileNotFoundError:  # replaced between stat and open: the next scrape reads the newer one
                return
            self._seen, self._text = key, None

    def text(self) -> bytes:
        """For the rare scrape without gzip: decompressed once per render, kept until the next one."""
        if self._text is None:
            self._text = zlib.decompress(self.gzip or b"", 16 + zlib.MAX_WBITS)  # one gzip member
        return self._text


class Connection:
    __slots__ = ("client", "close_after", "first_byte", "idle_since", "inbox", "opened", "outbox", "sending_since",
                 "sock")

    def __init__(self, sock: socket.socket, client: str, now: float) -> None:
        self.sock, self.client = sock, client
        self.inbox, self.outbox = bytearray(), memoryview(b"")
        self.opened, self.idle_since = now, now
        self.first_byte: float | None = None
        self.sending_since: float | None = None
        self.close_after = False

    @property
    def idle(self) -> bool:
        """Waiting for (the rest of) a request, no response in flight: what the cap may close for a newcomer."""
        return not self.outbox


class Server:
    def __init__(self, listener: socket.socket, directory: str, parent_pid: int, config: dict[str, str]) -> None:
        self.listener, self.parent_pid = listener, parent_pid
        token = config.get("read_token")
        self.token = token.encode("latin-1") if token else None
        self.content_type = config["content_type"].encode("latin-1")
        self.max_connections = int(config["max_connections"])
        self.read_timeout_s = float(config["read_timeout_s"])
        self.keep_alive_s = float(config["keep_alive_s"])
        self.max_head_bytes = int(config.get("max_head_bytes", MAX_HEAD_BYTES))
        self.max_header_fields = int(config.get("max_header_fields", MAX_HEADER_FIELDS))
        self.max_url_bytes = int(config.get("max_url_bytes", MAX_URL_BYTES))
        self.throttle = Throttle(int(config["auth_failures_per_window"]), float(config["auth_failure_window_s"]))
        self.body = Body(os.path.join(directory, METRICS_GZ))
        self.selector = selectors.DefaultSelector()
        self.connections: dict[int, Connection] = {}
        self.stopping = False
        # A signal's byte lands here (signal.set_wakeup_fd), so SIGTERM ends select() at once rather than at the
        # next tick: the daemon's stop waits for this process, and every stop used to cost up to TICK_S.
        self.wakeup, self.wakeup_writer = socket.socketpair()
        self.wakeup.setblocking(False)
        self.wakeup_writer.setblocking(False)

    # -- the loop ---------------------------------------------------------------------------------------------

    def run(self) -> None:
        self.listener.setblocking(False)
        self.selector.register(self.listener, selectors.EVENT_READ, None)
        self.selector.register(self.wakeup, selectors.EVENT_READ, WAKEUP)
        last_tick = time.monotonic()
        while not self.stopping:
            for key, events in self.selector.select(TICK_S):
                if key.data is None:
                    self._accept()
                    continue
                if key.data is WAKEUP:
                    self._drain_wakeup()
                    continue
                conn: Connection = key.data
                if events & selectors.EVENT_READ:
                    self._read(conn)
                if events & selectors.EVENT_WRITE and conn.sock.fileno() >= 0:
                    self._write(conn)
            now = time.monotonic()
            if now - last_tick >= TICK_S:
                last_tick = now
                if os.getppid() != self.parent_pid:
                    return
                self._expire(now)
        for conn in list(self.connections.values()):
            self._close(conn)

    def _drain_wakeup(self) -> None:
        try:
            while self.wakeup.recv(512):
                pass
        except (BlockingIOError, InterruptedError):
            pass

    def _accept(self) -> None:
        while True:
            try:
                sock, address = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # EMFILE and friends: the connections already open go on
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    return
                raise
            now = time.monotonic()
            if len(self.connections) >= self.max_connections and not self._make_room():
                sock.close()
                continue
            sock.setblocking(False)
            host = address[0] if isinstance(address, tuple) else "unknown"
            conn = Connection(sock, client_key(str(host)), now)
            self.connections[sock.fileno()] = conn
            self.selector.register(sock, selectors.EVENT_READ, conn)

    def _make_room(self) -> bool:
        idle = [c for c in self.connections.values() if c.idle]
        if not idle:
            return False
        self._close(min(idle, key=lambda c: c.idle_since))
        return True

    def _expire(self, now: float) -> None:
        for conn in list(self.connections.values()):
            if conn.outbox:
                if conn.sending_since is not None and now - conn.sending_since > SEND_TIMEOUT_S:
                    self._close(conn)
            elif conn.inbox or conn.first_byte is not None:
                if now - (conn.first_byte or conn.opened) > self.read_timeout_s:
                    self._close(conn)
            elif now - conn.idle_since > (self.read_timeout_s if conn.idle_since == conn.opened else self.keep_alive_s):
                self._close(conn)

    def _close(self, conn: Connection) -> None:
        fd = conn.sock.fileno()
        if fd >= 0:
            self.connections.pop(fd, None)
            try:
                self.selector.unregister(conn.sock)
            except (KeyError, ValueError):
                pass
        conn.sock.close()

    def _read(self, conn: Connection) -> None:
        try:
            data = conn.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(conn)
            return
        if not data:
            self._close(conn)
            return
        if conn.first_byte is None:
            conn.first_byte = time.monotonic()
        conn.inbox += data
        if len(conn.inbox) > 4 * self.max_head_bytes:  # pipelining more than it reads: a client to let go
            self._close(conn)
            return
        self._serve_buffered(conn)

    def _serve_buffered(self, conn: Connection) -> None:
        """Answer the request in the inbox once its head is whole (pipelined ones after the response is sent)."""
        if conn.outbox:
            return
        end = conn.inbox.find(b"\r\n\r\n", 0, self.max_head_bytes)
        if end < 0:
            if len(conn.inbox) >= self.max_head_bytes:
                self._respond(conn, 431, b"request head above %d bytes\n" % self.max_head_bytes, close=True)
            return
        head = bytes(conn.inbox[:end]).decode("latin-1")
        del conn.inbox[:end + 4]
        conn.first_byte = time.monotonic() if conn.inbox else None
        self._answer(conn, head)

    def _write(self, conn: Connection) -> None:
        try:
            sent = conn.sock.send(conn.outbox)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(conn)
            return
        conn.outbox = conn.outbox[sent:]
        if conn.outbox:
            return
        conn.sending_since = None
        if conn.close_after:
            self._close(conn)
            return
        conn.idle_since = time.monotonic()
        self.selector.modify(conn.sock, selectors.EVENT_READ, conn)
        if conn.inbox:
            self._serve_buffered(conn)

    # -- HTTP -------------------------------------------------------------------------------------------------

    def _answer(self, conn: Connection, head: str) -> None:
        lines = head.split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            self._respond(conn, 400, b"bad request line\n", close=True)
            return
        method, target, version = parts
        if len(target) > self.max_url_bytes:
            self._respond(conn, 414, b"URL above %d bytes\n" % self.max_url_bytes, close=True)
            return
        if len(lines) - 1 > self.max_header_fields:
            self._respond(conn, 431, b"request header fields above %d\n" % self.max_header_fields, close=True)
            return
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep:
                self._respond(conn, 400, b"bad header line\n", close=True)
                return
            headers[name.strip().lower()] = value.strip()
        connection = headers.get("connection", "").lower()
        close = "close" in connection or (version == "HTTP/1.0" and "keep-alive" not in connection)
        if headers.get("content-length", "0") != "0" or "transfer-encoding" in headers:
            self._respond(conn, 400, b"no request body is taken here\n", close=True)
            return
        path = target.split("?", 1)[0]
        if path == "/healthz":
            self._respond(conn, 200, b'{"status":"ok"}', close=close, head_only=method == "HEAD",
                          content_type=b"application/json")
            return
        if path != "/metrics":
            self._respond(conn, 404, b"this port serves /metrics only; the API is on api.port\n", close=close)
            return
        if method not in ("GET", "HEAD"):
            self._respond(conn, 405, b"GET /metrics\n", close=close, extra=b"Allow: GET, HEAD\r\n")
            return
        if self.token is not None and not self._authorized(conn, headers.get("authorization", "")):
            return
        self.body.refresh()
        if self.body.gzip is None:
            self._respond(conn, 503, b"the collector has not rendered /metrics yet; retry shortly\n", close=close,
                          extra=b"Retry-After: 5\r\n")
            return
        compressed = accepts_gzip(headers.get("accept-encoding", ""))
        payload = self.body.gzip if compressed else self.body.text()
        extra = b"Vary: Accept-Encoding\r\n" + (b"Content-Encoding: gzip\r\n" if compressed else b"")
        self._respond(conn, 200, payload, close=close, head_only=method == "HEAD", extra=extra,
                      content_type=self.content_type)

    def _authorized(self, conn: Connection, authorization: str) -> bool:
        """The bearer token, compared in constant time; 401 or 429 answered here, failures reported to the parent."""
        now = time.monotonic()
        retry_after = self.throttle.blocked(conn.client, now)
        if retry_after is not None:
            report("read", "throttled")
            body = b'{"detail":"too many failed authentications from this client; retry in %ds"}' % retry_after
            self._respond(conn, 429, body, close=False, extra=f"Retry-After: {retry_after}\r\n".encode(),
                          content_type=b"application/json")
            return False
        scheme, _, offered = authorization.partition(" ")
        if scheme.lower() == "bearer" and compare_digest(offered.strip().encode("latin-1"),
                                                              self.token or b""):
            return True
        if scheme.lower() == "bearer" and offered.strip():  # a wrong token (a missing one is not a guess)
            self.throttle.fail(conn.client, now)
            report("read", "refused")
        self._respond(conn, 401, b'{"detail":"read token missing or wrong: send \'Authorization: Bearer '
                                 b'<api.read_token>\'"}', close=False,
                      extra=b'WWW-Authenticate: Bearer realm="txnwatch"\r\n', content_type=b"application/json")
        return False

    def _respond(self, conn: Connection, status: int, body: bytes, *, close: bool, head_only: bool = False,
                 extra: bytes = b"", content_type: bytes = b"text/plain; charset=utf-8") -> None:
        reason = _REASONS.get(status, b"")
        head = (b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n%s%s%s\r\n"
                % (status, reason, content_type, len(body), extra, SECURITY_HEADERS,
                   b"Connection: close\r\n" if close else b""))
        conn.close_after = close
        conn.outbox = memoryview(head if head_only else head + body)
        conn.sending_since = time.monotonic()
        self._write(conn)
        if conn.outbox and conn.sock.fileno() >= 0:
            self.selector.modify(conn.sock, selectors.EVENT_WRITE, conn)


_REASONS = {200: b"OK", 400: b"Bad Request", 401: b"Unauthorized", 404: b"Not Found", 405: b"Method Not Allowed",
            414: b"URI Too Long", 429: b"Too Many Requests", 431: b"Request Header Fields Too Large", 503: b"Service Unavailable"}


def report(kind: str, result: str) -> None:
    """One failed authentication, for the parent's txnwatch_auth_failures_total."""
    try:
        sys.stdout.write(f"{kind} {result}\n")
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):
        pass


def die_with_parent(parent_pid: int) -> None:
    """SIGTERM from the kernel when the parent's supervising thread exits (Linux); the parent pid is also checked
    once a second by the loop, for other systems."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError, ImportError):
        pass
    if os.getppid() != parent_pid:
        sys.exit(0)


def read_config(text: str) -> dict[str, str]:
    """``name<TAB>value`` lines (txnwatch.supervise.metrics_process.config_lines): no json, ~1 MB less RSS."""
    return dict(line.split("\t", 1) for line in text.splitlines() if "\t" in line)


def main(argv: list[str]) -> int:
    fd, directory, parent_pid = int(argv[1]), argv[2], int(argv[3])
    die_with_parent(parent_pid)
    config = read_config(sys.stdin.read())
    listener = socket.socket(fileno=fd)
    server = Server(listener, directory, parent_pid, config)

    def stop(_signum: int, _frame: object) -> None:
        server.stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.set_wakeup_fd(server.wakeup_writer.fileno(), warn_on_full_buffer=False)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the parent stops us in order
    server.run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
