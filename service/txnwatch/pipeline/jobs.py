"""The rollups, as pure DataFrame → DataFrame functions (no I/O, no Python UDFs).

Every rollup comes at two grains, ``hour`` and ``day`` (``period`` /
``period_start``), because percentiles do not add up: a day's p99 must be computed
from the day's raw rows.  Episodes count in the hour/day they started.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from txnwatch.core.vocabulary import TxnEvent
from txnwatch.pipeline.prefix import DEFAULT_RULE, prefix_column

PERIODS = ("hour", "day")
ALL_TOPICS = "*"
QUANTILES = [0.5, 0.95, 0.99]
QUANTILES_ACCURACY = 10_000


@dataclass(frozen=True)
class RollupOptions:
    prefix_rule: str = DEFAULT_RULE
    top_n: int = 10


def _has(event: TxnEvent) -> Column:
    return F.array_contains("events", event.value).cast("long")


def _topics(partitions: Column) -> Column:
    """Distinct topics of "topic-partition" strings."""
    return F.array_distinct(F.transform(F.coalesce(partitions, F.array().cast("array<string>")),
                                        lambda p: F.regexp_replace(p, r"-[0-9]+$", "")))


def _quantiles(column: str, name: str) -> list[Column]:
    q = F.percentile_approx(column, QUANTILES, QUANTILES_ACCURACY)
    return [q[0].cast("double").alias(f"{name}_p50"), q[1].cast("double").alias(f"{name}_p95"),
            q[2].cast("double").alias(f"{name}_p99")]


def _per_period(facts: DataFrame, keys: Sequence[str], aggs: Sequence[Column]) -> DataFrame:
    """Both grains in one scan and one shuffle: each row is counted once per period it falls in."""
    grains = F.explode(F.array(*(F.struct(F.lit(p).alias("period"), F.date_trunc(p, "ts").alias("period_start"))
                                 for p in PERIODS))).alias("grain")
    return (facts.select("*", grains).groupBy("cluster", "grain.period", "grain.period_start", *keys)
            .agg(*aggs))


def transaction_events(transitions: DataFrame, prefix_rule: str) -> DataFrame:
    """Transitions that end a transaction or fence a producer: the rows every transaction rollup reads."""
    wanted = F.array(*(F.lit(e.value) for e in (TxnEvent.COMMIT, TxnEvent.ABORT, TxnEvent.FENCED)))
    return transitions.where(F.arrays_overlap("events", wanted)).select(
        "cluster", F.col("observed_at").alias("ts"), "transactional_id",
        prefix_column(prefix_rule, F.col("transactional_id")).alias("txn_prefix"),
        _topics(F.col("partitions")).alias("topics"),
        _has(TxnEvent.COMMIT).alias("is_commit"), _has(TxnEvent.ABORT).alias("is_abort"),
        _has(TxnEvent.TIMEOUT_ABORT).alias("is_timeout_abort"), _has(TxnEvent.FENCED).alias("is_fenced"),
        F.when(F.arrays_overlap("events", F.array(F.lit(TxnEvent.COMMIT.value), F.lit(TxnEvent.ABORT.value))),
               F.col("duration_ms"))
        .alias("duration_ms"))


def transaction_rollup(events: DataFrame) -> DataFrame:
    """Per cluster/period/prefix/topic; topic ``*`` is the prefix across all its topics."""
    facts = events.select("*", F.explode(F.concat("topics", F.array(F.lit(ALL_TOPICS)))).alias("topic"))
    completed = F.greatest("is_commit", "is_abort")
    rolled = _per_period(facts, ["txn_prefix", "topic"], [
        F.sum(completed).alias("txn_count"), F.sum("is_commit").alias("commits"),
        F.sum("is_abort").alias("aborts"), F.sum("is_timeout_abort").alias("timeout_aborts"),
        F.sum("is_fenced").alias("fences"), *_quantiles("duration_ms", "duration_ms")])
    rate = lambda c: F.try_divide(F.col(c).cast("double"), F.col("txn_count"))  # noqa: E731
    return rolled.select("*", rate("commits").alias("commit_rate"), rate("aborts").alias("abort_rate"),
                         rate("timeout_aborts").alias("timeout_abort_rate"), rate("fences").alias("fence_rate"))


def _minutes(start: str, end: str) -> Column:
    return (F.unix_micros(F.col(end)) - F.unix_micros(F.col(start))) / 60e6


def topic_rollup(offsets: DataFrame, stalls: DataFrame, hanging: DataFrame, verification: DataFrame) -> DataFrame:
    """Per cluster/period/topic: LSO health, hanging transactions and KIP-890 verification."""
    keys = ["cluster", "period", "period_start", "topic"]
    parts = [
        _per_period(offsets.select("cluster", "topic", F.col("sampled_at").alias("ts"),
                                   (F.col("high_watermark") - F.col("last_stable_offset")).alias("gap")),
                    ["topic"], [F.count("*").alias("offset_samples"), F.max("gap").alias("sample_max_gap")]),
        _per_period(stalls.select("cluster", "topic", F.col("started_at").alias("ts"), "max_gap",
                                  _minutes("started_at", "ended_at").alias("minutes")),
                    ["topic"], [F.count("*").alias("lso_stalls"), F.sum("minutes").alias("lso_stall_minutes"),
                                F.max("max_gap").alias("stall_max_gap")]),
        _per_period(hanging.select("cluster", "topic", F.col("first_seen_at").alias("ts")),
                    ["topic"], [F.count("*").alias("hanging_txns")]),
        _per_period(verification.select("cluster", "topic", F.col("observed_at").alias("ts"),
                                        "verification_ms", F.col("failed").cast("long").alias("failed")),
                    ["topic"], [F.count("*").alias("verification_samples"),
                                F.sum("failed").alias("verification_failures"),
                                *_quantiles("verification_ms", "verification_ms")]),
    ]
    joined = parts[0]
    for part in parts[1:]:
        joined = joined.join(part, keys, "full_outer")
    zero = lambda c: F.coalesce(F.col(c), F.lit(0)).alias(c)  # noqa: E731
    counts = ["offset_samples", "lso_stalls", "hanging_txns", "verification_samples", "verification_failures"]
    return joined.select(
        *keys, *(zero(c) for c in counts),
        F.coalesce(F.col("lso_stall_minutes"), F.lit(0.0)).alias("lso_stall_minutes"),
        F.greatest("sample_max_gap", "stall_max_gap").alias("max_hwm_lso_gap"),
        F.try_divide(F.col("verification_failures").cast("double"), F.col("verification_samples"))
        .alias("verification_failure_rate"),
        "verification_ms_p50", "verification_ms_p95", "verification_ms_p99")


def lag_rollup(lag: DataFrame) -> DataFrame:
    """read_committed lag against the LSO, with the HWM-based figure alongside for contrast."""
    facts = lag.select("cluster", "group_id", "topic", F.col("sampled_at").alias("ts"), "lag_lso", "lag_hwm")
    return _per_period(facts, ["group_id", "topic"], [
        F.count("*").alias("samples"), *_quantiles("lag_lso", "lag_lso"), F.max("lag_lso").alias("lag_lso_max"),
        F.percentile_approx("lag_hwm", 0.95).cast("double").alias("lag_hwm_p95")])


def _day(ts: str) -> Column:
    return F.date_trunc("day", ts).alias("period_start")


def offenders(events: DataFrame, stalls: DataFrame, hanging: DataFrame, verification: DataFrame,
              lag: DataFrame, top_n: int) -> DataFrame:
    """Top-N per cluster/day and kind; ties broken by subject so reruns agree."""
    tp = F.concat_ws("-", "topic", F.col("partition").cast("string"))
    per_txn = (events.groupBy("cluster", _day("ts"), F.col("transactional_id").alias("subject"))
               .agg(F.max("duration_ms").cast("double").alias("txn_max_duration_ms"),
                    F.sum("is_abort").cast("double").alias("txn_aborts"),
                    F.sum("is_fenced").cast("double").alias("txn_fences")))
    kinds = [per_txn.select("cluster", "period_start", "subject", F.lit(k).alias("kind"), F.col(k).alias("value"))
             for k in ("txn_max_duration_ms", "txn_aborts", "txn_fences")]
    kinds += [
        stalls.groupBy("cluster", _day("started_at"), tp.alias("subject"))
        .agg(F.sum(_minutes("started_at", "ended_at")).alias("value")).withColumn("kind", F.lit("lso_stall_minutes")),
        hanging.groupBy("cluster", _day("first_seen_at"),
                        F.coalesce("transactional_id", F.concat(F.lit("pid:"), F.col("producer_id").cast("string")))
                        .alias("subject"))
        .agg(F.count("*").cast("double").alias("value")).withColumn("kind", F.lit("hanging_txns")),
        verification.groupBy("cluster", _day("observed_at"), tp.alias("subject"))
        .agg(F.sum(F.col("failed").cast("long")).cast("double").alias("value"))
        .withColumn("kind", F.lit("verification_failures")),
        lag.groupBy("cluster", _day("sampled_at"), F.col("group_id").alias("subject"))
        .agg(F.max("lag_lso").cast("double").alias("value")).withColumn("kind", F.lit("lag_lso_max")),
    ]
    union = kinds[0]
    for k in kinds[1:]:
        union = union.unionByName(k)
    ranked = union.where(F.col("value") > 0).withColumn("rank", F.row_number().over(
        Window.partitionBy("cluster", "period_start", "kind").orderBy(F.desc("value"), "subject")))
    return ranked.where(F.col("rank") <= top_n).select("cluster", "period_start", "kind", "rank", "subject", "value")


def all_rollups(tables: Mapping[str, DataFrame], options: RollupOptions) -> dict[str, DataFrame]:
    events = transaction_events(tables["transitions"], options.prefix_rule).cache()
    stalls = tables["lso_stalls"]
    return {
        "transactions": transaction_rollup(events),
        "topics": topic_rollup(tables["offsets"], stalls, tables["hanging"], tables["verification"]),
        "lag": lag_rollup(tables["lag"]),
        "offenders": offenders(events, stalls, tables["hanging"], tables["verification"], tables["lag"],
                               options.top_n),
    }
