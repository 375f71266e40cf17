"""Which polls write their consumer-lag rows: every poll, or one per interval the operator sets.

Lag rows are the store's biggest per-poll write on a cluster with many groups: 2,000 offset-only
groups wrote 0.32 MB per poll, and 5,000 would fill the chart's 1 GiB volume in ~6 h (issue 23).
/metrics always shows the latest poll; the database needs lag at the resolution its readers use
(the API's group pages, incident context, the pipeline's hourly and daily lag percentiles).

A poll writes its rows when it is the first of its cluster in an interval window aligned to the
clock (``floor(t / interval)``), so samples land at regular times whatever the poll jitter, and a
restart or a new leader writes at its first poll.  Every written sample is a complete picture of
the kept groups at one ``sampled_at``, which is what the readers rely on ("the latest sample");
samples stay evenly spaced, so the pipeline's percentiles are not skewed towards busy moments the
way rows written only on change would be.
"""

from __future__ import annotations

from collections.abc import Mapping


class LagSampling:
    """Per cluster, the window of its last written sample.  Used by the recorder only, from the cluster's job."""

    def __init__(self, interval_s: Mapping[str, float] | None = None, default_s: float = 0.0) -> None:
        self._interval_ms = {name: round(s * 1000) for name, s in (interval_s or {}).items()}
        self._default_ms = round(default_s * 1000)
        self._window: dict[str, int] = {}

    def due(self, cluster: str, at_ms: int) -> bool:
        """True if the poll at ``at_ms`` writes its lag rows (and, if so, its window is taken)."""
        interval = self._interval_ms.get(cluster, self._default_ms)
        if interval <= 0:
            return True
        window = at_ms // interval
        if self._window.get(cluster) == window:
            return False
        self._window[cluster] = window
        return True
