"""CPU seconds per thread of this process, by OS thread name: for the benchmarks that time the tail's threads apart
(txnlog_lab, txnlog_commits).  Standard library only and no path changes, so a benchmark's ``--baseline`` child can
import it without putting this checkout's txnwatch ahead of the baseline's."""

from __future__ import annotations

import os
from pathlib import Path


def thread_cpu_s() -> dict[str, float]:
    """CPU seconds per thread of this process so far, by OS thread name (``/proc/self/task/*/stat``): the
    tail's own thread, its commit writer and kafka-python's I/O loop, each apart."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue  # a thread that ended meanwhile
        name, fields = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return out
