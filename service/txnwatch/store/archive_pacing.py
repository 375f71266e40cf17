"""When the transition stream's archive export is worth its child process (issue 25: pay for change).

The export runs in a short-lived child (txnwatch.store.archive_job: pyarrow stays out of the daemon), and a
child costs ~0.8 CPU-s to start and import whatever it exports.  Checked every minute, it ran every minute:
on the issue 25 lab (three producers trickling transactions) that was 0.8 of the daemon's CPU-s per minute
for a few hundred rows a time.  Now the check is one ``max(id)`` in the daemon, and the child runs when

* ``batch_rows`` rows were staged since its last run (a busy log is exported as often as before), or
* ``max_wait_s`` passed since its last run (a trickle is exported, and staged rows past the hot window are
  purged, at most this late), or
* it never ran in this process (the first check after start, as before).

What readers see does not change: a staged row stays in the database until it is archived *and* older than
``transaction_log.hot_transitions_minutes`` (60), so the API's timeline answers from the database as before;
only the archive (the pipeline's input) may trail by up to ``max_wait_s`` on a quiet log.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from txnwatch.store import models as m

#: A quiet log's stream reaches the archive at most this late.
MAX_WAIT_S = 600.0
#: A busy log's stream is exported once this many rows were staged (checked every minute).
BATCH_ROWS = 20_000


def newest_transition_id(sessions: sessionmaker[Session]) -> int:
    """The transitions table's highest id (its primary key: one index lookup); 0 when it is empty."""
    with sessions() as session:
        return int(session.scalar(select(func.max(m.TransactionTransition.id))) or 0)


@dataclass
class ArchivePacing:
    """Runs ``job`` only when it is due (see the module's docstring); one per job, called from one thread."""

    newest_id: Callable[[], int]
    job: Callable[[], object]  # False when it failed: tried again at the next check, as before
    clock: Callable[[], float] = time.monotonic
    max_wait_s: float = MAX_WAIT_S
    batch_rows: int = BATCH_ROWS
    _last_at: float | None = field(default=None, init=False)
    _last_id: int = field(default=0, init=False)

    def __call__(self) -> bool:
        """Run the job if due; True when it ran and did not fail."""
        now, newest = self.clock(), self.newest_id()
        if self._last_at is not None and now - self._last_at < self.max_wait_s \
                and newest - self._last_id < self.batch_rows:
            return False
        if self.job() is False:
            return False
        self._last_at, self._last_id = now, newest  # rows staged while it ran count towards the next batch
        return True
