"""The daemon caps glibc's malloc arenas unless the operator chose a value; its children inherit the cap."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from txnwatch.runtime.malloc_arenas import ENV, limit_arenas


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
