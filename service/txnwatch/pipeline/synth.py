"""Synthetic history written straight into the archive format, for tests and benchmarks.

Vectorised with pyarrow.compute (no per-row Python), so 10M rows take seconds.  The
shape is plausible rather than realistic: most transitions are commits with
exponential durations, a few aborts, coordinator timeouts and fences; a little lag,
a few stalls and hanging transactions.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import date, datetime, time, timedelta, timezone

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from txnwatch.core.vocabulary import ABORT, COMMIT, EPOCH_BUMP, TxnEvent, TxnState
from txnwatch.store.archive import TABLES, open_archive, read_manifest, write_manifest

SHARES = {"transitions": 0.60, "offsets": 0.14, "verification": 0.10, "lag": 0.15,
          "lso_stalls": 0.005, "hanging": 0.005}
BATCH_ROWS = 1_000_000
TOPICS = [f"topic{t}" for t in range(10)]
_PARTITIONING = ds.partitioning(pa.schema([("cluster", pa.string()), ("date", pa.string())]), flavor="hive")

# (events, to_state) in per-cent shares: 80 commits, 10 aborts, 4 timeout aborts, 2 fences, 4 starts.
_OUTCOMES = ([([COMMIT], TxnState.COMPLETE_COMMIT.value)] * 80 + [([ABORT], TxnState.COMPLETE_ABORT.value)] * 10
             + [([ABORT, EPOCH_BUMP, TxnEvent.TIMEOUT_ABORT.value], TxnState.COMPLETE_ABORT.value)] * 4
             + [([EPOCH_BUMP, TxnEvent.FENCED.value], TxnState.EMPTY.value)] * 2 + [([], TxnState.ONGOING.value)] * 4)


def _ints(n: int, k: int) -> pa.Array:
    return pc.cast(pc.floor(pc.multiply(pc.random(n), k)), pa.int64())


def _exp(n: int, mean: float) -> pa.Array:
    # 1 - U is in (0, 1], so the log is finite.
    return pc.cast(pc.floor(pc.multiply(pc.negate(pc.ln(pc.subtract(1.0, pc.random(n)))), mean)), pa.int64())


def _pick(pool: Sequence[object], idx: pa.Array, type_: pa.DataType | None = None) -> pa.Array:
    return pc.take(pa.array(pool, type=type_), idx)


def _times(n: int, start: datetime, days: int) -> pa.Array:
    micros = pc.add(int(start.timestamp() * 1e6), _ints(n, days * 86_400_000_000))
    return pc.cast(micros, pa.timestamp("us", tz="UTC"))


def _shift(ts: pa.Array, micros: pa.Array) -> pa.Array:
    return pc.cast(pc.add(pc.cast(ts, pa.int64()), micros), pa.timestamp("us", tz="UTC"))


class _Batch:
    def __init__(self, n: int, first_id: int, start: datetime, days: int, clusters: int) -> None:
        self.n = n
        self.ids = pc.add(pc.cumulative_sum(pa.repeat(1, n).cast(pa.int64())), first_id - 1)
        self.cluster = _pick([f"synth-{c}" for c in range(clusters)], _ints(n, clusters))
        self.start, self.days = start, days

    def times(self) -> pa.Array:
        return _times(self.n, self.start, self.days)

    def topic(self) -> tuple[pa.Array, pa.Array]:
        return _pick(TOPICS, _ints(self.n, len(TOPICS))), pc.cast(_ints(self.n, 6), pa.int32())

    def nulls(self, type_: pa.DataType) -> pa.Array:
        return pa.nulls(self.n, type_)


def _transitions(b: _Batch) -> dict[str, pa.Array]:
    outcome = _ints(b.n, len(_OUTCOMES))
    completed = pc.is_in(outcome, pa.array([i for i, (e, _) in enumerate(_OUTCOMES) if COMMIT in e or ABORT in e]))
    at = b.times()
    app = _ints(b.n, 20)
    txn_ids = [f"app{a}-{i}" for a in range(20) for i in range(10)]
    partitions = [[f"{t}-{p}" for p in range(3)] for t in TOPICS] + [[f"{TOPICS[0]}-0", f"{TOPICS[1]}-1"]]
    return {"transactional_id": _pick(txn_ids, pc.add(pc.multiply(app, 10), _ints(b.n, 10))),
            "observed_at": at, "from_state": pa.repeat(TxnState.ONGOING.value, b.n),
            "to_state": _pick([s for _, s in _OUTCOMES], outcome),
            "producer_id": pc.add(app, 1000), "producer_epoch": pc.cast(_ints(b.n, 100), pa.int32()),
            "timeout_ms": pa.repeat(60_000, b.n),
            "txn_started_at": at,
            "partitions": _pick(partitions, _ints(b.n, len(partitions)), pa.list_(pa.string())),
            "events": _pick([e for e, _ in _OUTCOMES], outcome, pa.list_(pa.string())),
            "duration_ms": pc.if_else(completed, _exp(b.n, 400.0), b.nulls(pa.int64()))}


def _offsets(b: _Batch) -> dict[str, pa.Array]:
    topic, partition = b.topic()
    hwm = _ints(b.n, 1_000_000_000)
    return {"topic": topic, "partition": partition, "sampled_at": b.times(),
            "high_watermark": hwm, "last_stable_offset": pc.subtract(hwm, _exp(b.n, 50.0)),
            "open_transactions": pc.cast(_ints(b.n, 3), pa.int32())}


def _verification(b: _Batch) -> dict[str, pa.Array]:
    topic, partition = b.topic()
    return {"topic": topic, "partition": partition, "producer_id": _ints(b.n, 200),
            "observed_at": b.times(), "verification_ms": _exp(b.n, 20.0),
            "failed": pc.less(pc.random(b.n), 0.01)}


def _lag(b: _Batch) -> dict[str, pa.Array]:
    topic, partition = b.topic()
    lag_lso = _exp(b.n, 100.0)
    return {"group_id": _pick([f"group{g}" for g in range(8)], _ints(b.n, 8)), "topic": topic,
            "partition": partition, "sampled_at": b.times(), "committed_offset": _ints(b.n, 1_000_000_000),
            "lag_hwm": pc.add(lag_lso, _exp(b.n, 30.0)), "lag_lso": lag_lso}


def _stalls(b: _Batch) -> dict[str, pa.Array]:
    topic, partition = b.topic()
    started = b.times()
    ended = _shift(started, pc.multiply(_exp(b.n, 120.0), 1_000_000))
    return {"topic": topic, "partition": partition, "started_at": started, "ended_at": ended,
            "last_seen_at": ended, "stalled_lso": _ints(b.n, 1_000_000), "max_gap": _exp(b.n, 5_000.0)}


def _hanging(b: _Batch) -> dict[str, pa.Array]:
    topic, partition = b.topic()
    first = b.times()
    resolved = _shift(first, pc.multiply(_exp(b.n, 1_800.0), 1_000_000))
    return {"incident_key": pc.cast(b.ids, pa.string()), "topic": topic, "partition": partition,
            "producer_id": _ints(b.n, 200), "producer_epoch": pc.cast(_ints(b.n, 10), pa.int32()),
            "transactional_id": _pick([f"app{a}-0" for a in range(20)], _ints(b.n, 20)),
            "reason": pa.repeat("unknown_to_coordinator", b.n),
            "first_seen_at": first, "last_seen_at": resolved, "resolved_at": resolved}


_GENERATORS: dict[str, Callable[[_Batch], dict[str, pa.Array]]] = {
    "transitions": _transitions, "offsets": _offsets, "verification": _verification, "lag": _lag,
    "lso_stalls": _stalls, "hanging": _hanging}


def _table(name: str, b: _Batch) -> pa.Table:
    schema = TABLES[name].schema
    values = _GENERATORS[name](b) | {"id": b.ids}
    columns = [values[f.name].cast(f.type) if f.name in values else b.nulls(f.type) for f in schema]
    time_column = values[TABLES[name].time_column]
    extra = [b.cluster, pc.strftime(time_column, format="%Y-%m-%d")]
    return pa.Table.from_arrays([*columns, *extra], schema=schema.append(pa.field("cluster", pa.string()))
                                .append(pa.field("date", pa.string())))


def synthesize(out: str, rows: int, days: int = 7, clusters: int = 2, until: date | None = None) -> dict[str, int]:
    """Append ``rows`` synthetic rows (split over the history tables) to the archive at ``out``."""
    until = until or datetime.now(timezone.utc).date()
    start = datetime.combine(until - timedelta(days=days - 1), time(), timezone.utc)
    fs, root = open_archive(out)
    fs.create_dir(root, recursive=True)
    manifest = read_manifest(fs, root)
    written: dict[str, int] = {}
    for name, share in SHARES.items():
        state = manifest.table(name)
        remaining = max(1, int(rows * share)) if rows else 0
        written[name] = remaining
        while remaining:
            n = min(remaining, BATCH_ROWS)
            table = _table(name, _Batch(n, state.last_id + 1, start, days, clusters))
            tag = uuid.uuid4().hex[:8]

            def visit(f: ds.WrittenFile, files: dict[str, int] = state.files) -> None:
                files[f.path.removeprefix(root.rstrip("/") + "/")] = f.metadata.num_rows

            ds.write_dataset(table, f"{root}/{name}", filesystem=fs, format="parquet",
                             partitioning=_PARTITIONING, basename_template=f"synth-{tag}-{{i}}.parquet",
                             existing_data_behavior="overwrite_or_ignore", file_visitor=visit,
                             max_rows_per_group=256_000, max_partitions=100_000)
            state.last_id += n
            remaining -= n
    write_manifest(fs, root, manifest)
    return written
