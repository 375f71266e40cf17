"""How long to wait before trying again after consecutive failures: one rule for every retry loop.

The delay doubles per failure from ``base_s`` up to ``cap_s``. A caller that retries in step with
others (outbox deliveries of several replicas to one PagerDuty) passes a ``random.Random`` and gets
"full jitter over the upper half": a draw between half the ceiling and the ceiling, so retries spread
out but never shrink to nothing. The poll loop passes none: its delay is the ceiling itself, which
its tests and the cluster-down clock rely on.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Backoff:
    base_s: float
    cap_s: float

    def ceiling(self, failures: int) -> float:
        """The longest wait after ``failures`` consecutive failures (the first waits ``base_s``)."""
        return min(self.cap_s, self.base_s * 2 ** max(0, failures - 1))

    def delay(self, failures: int, rng: random.Random | None = None) -> float:
        ceiling = self.ceiling(failures)
        return ceiling if rng is None else rng.uniform(ceiling / 2, ceiling)
