"""The transition export's child runs when rows piled up or time passed, not at every minute's check (issue 25)."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from sqlalchemy import insert

from txnwatch.store import models as m
from txnwatch.store.archive_pacing import ArchivePacing, newest_transition_id
from txnwatch.store.db import make_engine, make_sessionmaker


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def pacing(newest: list[int], ran: list[float], clock: Clock, fails: list[bool] | None = None) -> ArchivePacing:
    def job() -> bool:
        ran.append(clock.now)
        return not (fails and fails.pop(0))

    return ArchivePacing(lambda: newest[0], job, clock=clock, max_wait_s=600, batch_rows=100)


def test_first_check_runs_then_a_trickle_waits_for_max_wait() -> None:
    clock, newest, ran = Clock(), [5], list[float]()
    paced = pacing(newest, ran, clock)
    assert paced() is True  # at start, as before
    for _ in range(9):  # nine minutely checks, 99 rows staged: not yet
        clock.now += 60
        newest[0] += 11
        assert paced() is False
    clock.now += 60  # ten minutes since the last run
    assert paced() is True
    assert ran == [1000.0, 1600.0]


def test_a_batch_of_rows_runs_it_at_the_next_check() -> None:
    clock, newest, ran = Clock(), [0], list[float]()
    paced = pacing(newest, ran, clock)
    paced()
    clock.now += 60
    newest[0] = 99
    assert paced() is False
    clock.now += 60
    newest[0] = 100
    assert paced() is True
    clock.now += 60
    newest[0] = 150  # counted from the id read before the last run
    assert paced() is False
    assert ran == [1000.0, 1120.0]


def test_a_failed_run_is_tried_again_at_the_next_check() -> None:
    clock, newest, ran = Clock(), [0], list[float]()
    paced = pacing(newest, ran, clock, fails=[False, True])
    paced()
    clock.now += 600
    assert paced() is False  # failed
    clock.now += 60
    assert paced() is True
    assert ran == [1000.0, 1600.0, 1660.0]


def test_newest_id_reads_the_table(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'db.sqlite'}")
    m.Base.metadata.create_all(engine)
    sessions = make_sessionmaker(engine)
    assert newest_transition_id(sessions) == 0
    with sessions.begin() as session:
        session.add(m.Cluster(id=1, name="c", bootstrap_servers="b", created_at=datetime.now(timezone.utc)))
        session.flush()
        session.execute(insert(m.TransactionTransition), [_row(m.TransactionTransition, i) for i in (7, 42)])
    assert newest_transition_id(sessions) == 42
    engine.dispose()


def _row(model: type[m.Base], row_id: int) -> dict[str, object]:
    columns = {c.name: c for c in model.__table__.columns}
    row: dict[str, object] = {"id": row_id}
    for name, column in columns.items():
        if name != "id" and not column.nullable and column.default is None and column.server_default is None:
            row[name] = "x" if column.type.python_type is str else 1
    return row
