"""The daemon caps glibc's malloc arenas unless the operator chose a value (its children inherit the cap), and gives
freed heap pages back after each /metrics render."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fixtures.migrated import migrate
from txnwatch.core.config import Settings
from txnwatch.runtime.malloc_arenas import ENV, limit_arenas
from txnwatch.runtime.wiring import after_render


def test_an_operator_value_is_left_alone() -> None:
    environ = {ENV: "8"}
    assert limit_arenas(environ) is None
    assert environ == {ENV: "8"}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_the_cap_is_set_and_handed_to_children() -> None:
    # In a child of its own: the cap stays for the life of a process, and the suite's must not change.
    code = ("import os, subprocess, sys; from txnwatch.runtime.malloc_arenas import limit_arenas; "
            "env = {k: v for k, v in os.environ.items() if k != 'MALLOC_ARENA_MAX'}; "
            "print(limit_arenas(env), env.get('MALLOC_ARENA_MAX'))")
    env = {k: v for k, v in os.environ.items() if k != ENV}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env,
                         timeout=60).stdout.split()
    libc = os.confstr("CS_GNU_LIBC_VERSION") or ""
    assert out == (["2", "2"] if libc.startswith("glibc") else ["None", "None"]), (libc, out)


@pytest.mark.skipif(not (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc"), reason="glibc's malloc_trim")
def test_the_trimmer_gives_freed_heap_pages_back() -> None:
    # In a child: 40,000 blocks of 4 KB from glibc's heap (pymalloc takes only <= 512 bytes), all freed but every
    # 64th, which pins the heap's top so that free() alone returns nothing; the trim must return most of it.
    code = ("import ctypes, sys; from txnwatch.runtime.malloc_arenas import heap_trimmer\n"
            "libc = ctypes.CDLL(None); libc.malloc.restype = ctypes.c_void_p; libc.free.argtypes = [ctypes.c_void_p]\n"
            "def rss():\n"
            "    return next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmRSS:')) // 1024\n"
            "blocks = [libc.malloc(4096) for _ in range(40_000)]\n"
            "for b in blocks: ctypes.memset(b, 1, 4096)\n"
            "for i, b in enumerate(blocks):\n"
            "    if i % 64: libc.free(b)\n"
            "before = rss(); released = heap_trimmer()(); print(before, rss(), released)")
    env = {k: v for k, v in os.environ.items() if k != ENV}
    before, after, released = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                             env=env, timeout=60).stdout.split()
    assert released == "True"
    assert int(before) - int(after) >= 100, (before, after)  # ~155 MB freed, all but the pinned pages given back


def test_each_render_is_handed_on_then_the_heap_trimmed() -> None:
    calls: list[str] = []

    def trim() -> bool:
        calls.append("trim")
        return True

    def publish(body: bytes) -> None:
        calls.append(f"publish {body!r}")

    hand_on = after_render(publish, trim)
    assert hand_on is not None
    hand_on(b"gz")
    assert calls == ["publish b'gz'", "trim"]
    calls.clear()

    def broken(body: bytes) -> None:
        raise OSError("disk full")

    failing = after_render(broken, trim)
    assert failing is not None
    with pytest.raises(OSError):
        failing(b"gz")
    assert calls == ["trim"]  # the exposition logs the failure; the memory is given back all the same
    assert after_render(publish, None) is publish  # no glibc: the render is handed on as before
    assert after_render(None, None) is None


def test_the_daemon_trims_after_the_exposition_thread_renders(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from txnwatch.runtime import wiring

    trims: list[float] = []

    def trim() -> bool:
        trims.append(time.monotonic())
        return True

    monkeypatch.setattr(wiring, "heap_trimmer", lambda: trim)
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    migrate(url)
    built = wiring.build_runtime(Settings(database_url=url, clusters=[{"name": "c", "bootstrap_servers": "h:9092"}]),
                                 metrics_to=tmp_path)
    (exposition,) = [s for s in built.services if s.name == "exposition"]
    try:
        exposition.start()
        deadline = time.monotonic() + 30
        while not trims and time.monotonic() < deadline:
            time.sleep(0.05)
        exposition.stop()
    finally:
        built.engine.dispose()
    assert trims and (tmp_path / "metrics.gz").stat().st_size > 0  # handed on to the metrics port, then trimmed


def test_the_trim_waits_until_the_rss_has_grown_since_the_last_trim() -> None:
    from txnwatch.runtime import malloc_arenas

    calls: list[str] = []
    rss = [100 << 20]

    def trim() -> bool:
        calls.append("trim")
        return True

    gated = malloc_arenas._GatedTrim(trim, 2 << 20, lambda: rss[0])
    assert gated() is True and calls == ["trim"]  # the first render trims: nothing is known yet
    rss[0] += (2 << 20) - 4096
    assert gated() is False and calls == ["trim"]  # less than 2 MiB grown since: not worth a walk of the heap
    rss[0] += 4096
    assert gated() is True and calls == ["trim", "trim"]  # 2 MiB grown: trimmed, and the new mark is the RSS after
    rss[0] -= 8 << 20  # memory given back otherwise lowers the mark
    assert gated() is False
    rss[0] += 2 << 20
    assert gated() is True and calls == ["trim"] * 3


def test_an_unreadable_rss_trims_every_time() -> None:
    from txnwatch.runtime.malloc_arenas import _GatedTrim

    calls: list[str] = []

    def trim() -> bool:
        calls.append("trim")
        return True

    gated = _GatedTrim(trim, 2 << 20, lambda: None)
    assert gated() and gated() and calls == ["trim", "trim"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/statm")
def test_the_rss_is_read_from_statm() -> None:
    from txnwatch.runtime.malloc_arenas import _statm_rss_bytes

    status_kb = next(int(line.split()[1]) for line in Path("/proc/self/status").read_text().splitlines()
                     if line.startswith("VmRSS:"))
    rss = _statm_rss_bytes()
    assert rss is not None and abs(rss // 1024 - status_kb) < 4096, (rss, status_kb)
