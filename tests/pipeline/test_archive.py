"""Archive export on SQLite and real PostgreSQL: incremental, idempotent, crash-safe."""

from __future__ import annotations

import json
import posixpath
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from sqlalchemy import Engine, update
from sqlalchemy.orm import Session

from tests.pipeline.history import DAY, TRANSITIONS, seed, transition
from txnwatch.store import models as m
from txnwatch.store.archive import MANIFEST, export_history, open_archive, read_manifest


def _rows(root: Path, table: str) -> pa.Table:
    fs, base = open_archive(str(root))
    files = read_manifest(fs, base).table(table).files
    return pa.concat_tables([pq.read_table(posixpath.join(base, f)) for f in sorted(files)])


def _ids(root: Path, table: str) -> list[int]:
    return sorted(_rows(root, table).column("id").to_pylist())


def test_export_is_incremental_and_idempotent(engine: Engine, tmp_path: Path) -> None:
    ids = seed(engine)
    first = {r.table: r.rows for r in export_history(engine, str(tmp_path), chunk_rows=4)}
    assert first == {"transitions": len(TRANSITIONS), "offsets": 2, "lso_stalls": 1, "hanging": 1,
                     "verification": 4, "lag": 5}
    assert {r.table: r.rows for r in export_history(engine, str(tmp_path))} == dict.fromkeys(first, 0)
    assert len(_ids(tmp_path, "transitions")) == len(TRANSITIONS)

    manifest = json.loads((tmp_path / MANIFEST).read_text())
    assert manifest["tables"]["transitions"]["rows"] == len(TRANSITIONS)
    assert manifest["tables"]["lso_stalls"]["open_ids"] == [ids["open_stall_id"]]
    day = DAY.date().isoformat()
    assert all("cluster=c1/date=" in f["path"] for f in manifest["tables"]["transitions"]["files"])
    assert any(f"date={day}" in f["path"] for f in manifest["tables"]["lso_stalls"]["files"])

    table = _rows(tmp_path, "transitions")
    first_row = table.slice(0, 1).to_pylist()[0]
    assert first_row["events"] == ["commit"] and first_row["partitions"] == ["orders-0", "orders-1"]
    assert first_row["observed_at"] == DAY + timedelta(hours=10)


def test_closed_episode_exported_once_into_its_start_day(engine: Engine, tmp_path: Path) -> None:
    ids = seed(engine)
    export_history(engine, str(tmp_path))
    with Session(engine) as s, s.begin():
        s.execute(update(m.LsoStallEpisode).where(m.LsoStallEpisode.id == ids["open_stall_id"])
                  .values(ended_at=DAY + timedelta(days=3)))
    results = {r.table: r.rows for r in export_history(engine, str(tmp_path))}
    assert results["lso_stalls"] == 1
    assert export_history(engine, str(tmp_path))[2].rows == 0
    fs, root = open_archive(str(tmp_path))
    state = read_manifest(fs, root).table("lso_stalls")
    assert state.open_ids == [] and state.rows == 2
    assert all(f"date={DAY.date()}" in f for f in state.files)  # both started on DAY


def test_late_rows_land_in_their_own_day(engine: Engine, tmp_path: Path) -> None:
    seed(engine)
    export_history(engine, str(tmp_path))
    with Session(engine) as s, s.begin():
        s.add(transition(1, "appA-9", DAY - timedelta(days=5), ["commit"], 10, ["orders-0"]))
    export_history(engine, str(tmp_path))
    late = [f for f in read_manifest(*open_archive(str(tmp_path))).table("transitions").files
            if f"date={(DAY - timedelta(days=5)).date()}" in f]
    assert len(late) == 1 and len(_ids(tmp_path, "transitions")) == len(TRANSITIONS) + 1


def test_crash_before_manifest_leaves_no_duplicates(engine: Engine, tmp_path: Path) -> None:
    seed(engine)
    export_history(engine, str(tmp_path))
    with Session(engine) as s, s.begin():
        s.add_all(transition(1, "appC-0", DAY + timedelta(hours=1, minutes=i), ["commit"], 1, []) for i in range(3))
    before = (tmp_path / MANIFEST).read_text()
    export_history(engine, str(tmp_path))
    (tmp_path / MANIFEST).write_text(before)  # the files were written, the manifest never was
    results = {r.table: r for r in export_history(engine, str(tmp_path), chunk_rows=2)}
    assert results["transitions"].rows == 3 and results["transitions"].removed_orphans >= 1
    ids = _ids(tmp_path, "transitions")
    assert len(ids) == len(set(ids)) == len(TRANSITIONS) + 3
    on_disk = sorted(p.relative_to(tmp_path).as_posix() for p in (tmp_path / "transitions").rglob("*.parquet"))
    assert on_disk == sorted(read_manifest(*open_archive(str(tmp_path))).table("transitions").files)


def test_rows_younger_than_settle_wait_for_the_next_run(engine: Engine, tmp_path: Path) -> None:
    from datetime import datetime, timezone

    seed(engine)
    now = datetime.now(timezone.utc)
    with Session(engine) as s, s.begin():
        s.add(transition(1, "appD-0", now, ["commit"], 1, []))
        s.add(transition(1, "appD-1", DAY, ["commit"], 1, []))  # settled, but after a younger id
    assert export_history(engine, str(tmp_path))[0].rows == len(TRANSITIONS)
    assert export_history(engine, str(tmp_path), settle=timedelta(0))[0].rows == 2
