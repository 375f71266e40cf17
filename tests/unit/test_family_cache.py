"""/metrics pays for change (issue 25): unchanged families are reused, the body stays one gzip member of the same text."""

from __future__ import annotations

import gzip
import random
import zlib

import httpx
import pytest
from prometheus_client import generate_latest
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from txnwatch.metrics.exposition import Exposition
from txnwatch.metrics.family_cache import FamilyCache, crc32_combine, crc32_shift
from txnwatch.metrics.render import LeanGauge, int_label, render_text


class Mutable(Collector):
    """Families rebuilt on every collect from what the test sets, as the real collectors rebuild them from views."""

    def __init__(self) -> None:
        self.lags = {n: float(n) for n in range(500)}
        self.commits = 7.0
        self.hidden = False

    def collect(self) -> list[Metric]:
        lag = LeanGauge("kafka_consumergroup_lag", "Lag.", ["cluster", "consumergroup", "topic", "partition"])
        for n, value in self.lags.items():
            lag.add_metric(("c", "g", "t", int_label(n)), value)
        offset = LeanGauge("kafka_topic_partition_current_offset", "HWM.", ["cluster", "topic", "partition"])
        for n in range(300):
            offset.add_metric(("c", "t", int_label(n)), n * 10.0)
        commits = CounterMetricFamily("txnwatch_transaction_commits", "Commits.", labels=["cluster"])
        commits.add_metric(["c"], self.commits)
        return [lag, commits] if self.hidden else [lag, offset, commits]


def _registry(source: Collector) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(source)
    return registry


@pytest.mark.parametrize("lengths", [
    pytest.param((0, 0), id="empty"),
    pytest.param((1, 1), id="one-byte-each"),
    pytest.param((1000, 3), id="long-then-short"),
    pytest.param((7, 70_000), id="short-then-long"),
])
def test_crc32_combine_equals_zlib_over_the_concatenation(lengths: tuple[int, int]) -> None:
    rng = random.Random(sum(lengths))
    a, b = (bytes(rng.randrange(256) for _ in range(n)) for n in lengths)
    assert crc32_combine(zlib.crc32(a), zlib.crc32(b), len(b)) == zlib.crc32(a + b)
    assert crc32_combine(zlib.crc32(a), zlib.crc32(b), len(b), crc32_shift(len(b))) == zlib.crc32(a + b)


def test_unchanged_families_are_reused_and_the_body_equals_a_full_render() -> None:
    source = Mutable()
    registry = _registry(source)
    cache = FamilyCache()
    first = cache.render_gzip(registry.collect())
    assert (cache.rendered, cache.reused) == (3, 0)
    assert gzip.decompress(first) == generate_latest(registry)
    again = cache.render_gzip(registry.collect())
    assert (cache.rendered, cache.reused) == (0, 3) and again == first
    source.lags[42] = 99.5  # one lag moved: only its family is formatted again
    changed = cache.render_gzip(registry.collect())
    assert (cache.rendered, cache.reused) == (1, 2)
    assert gzip.decompress(changed) == generate_latest(registry) and b'partition="42",topic="t"} 99.5' in gzip.decompress(changed)
    source.commits, source.hidden = 8.0, True  # a counter moved, a family vanished
    fewer = cache.render_gzip(registry.collect())
    assert (cache.rendered, cache.reused) == (1, 1)
    assert gzip.decompress(fewer) == generate_latest(registry) and b"current_offset" not in gzip.decompress(fewer)
    source.hidden = False  # it comes back: formatted anew, not taken from a render before last
    assert gzip.decompress(cache.render_gzip(registry.collect())) == generate_latest(registry)


def test_the_body_is_one_gzip_member_that_every_decoder_reads_whole() -> None:
    """httpx (and any decoder built on one zlib stream) stops after the first member: there must be only one."""
    source = Mutable()
    cache = FamilyCache()
    body = cache.render_gzip(_registry(source).collect())
    decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
    assert decoder.decompress(body) == generate_latest(_registry(source)) and decoder.eof and not decoder.unused_data
    response = httpx.Response(200, content=body, headers={"Content-Encoding": "gzip"})
    assert response.content == render_text(_registry(source))


def test_the_exposition_renders_through_the_cache() -> None:
    source = Mutable()
    exposition = Exposition(_registry(source))
    exposition.render()
    exposition.render()
    assert exposition.families.reused == 3
    source.lags[0] = -1.0
    assert gzip.decompress(exposition.render()) == generate_latest(_registry(source))
    assert exposition.families.rendered == 1


class Big(Collector):
    """One LeanGauge of several chunks, whose rows the test moves, inserts, removes and relabels."""

    def __init__(self, rows: int) -> None:
        self.rows = [(f"g{n // 40}", "t", int_label(n % 40), float(n)) for n in range(rows)]

    def collect(self) -> list[Metric]:
        lag = LeanGauge("kafka_consumergroup_lag", "Lag.", ["consumergroup", "topic", "partition"])
        for group, topic, partition, value in self.rows:
            lag.add_metric((group, topic, partition), value)
        return [lag]


def test_a_moved_row_formats_only_its_chunk_and_the_body_stays_the_full_render() -> None:
    from txnwatch.metrics.family_cache import CHUNK_ROWS

    source = Big(3 * CHUNK_ROWS + 17)  # a header and four chunks
    registry = _registry(source)
    cache = FamilyCache()
    cache.render_gzip(registry.collect())
    assert cache.chunks_rendered == 5
    group, topic, partition, _ = source.rows[CHUNK_ROWS + 5]
    source.rows[CHUNK_ROWS + 5] = (group, topic, partition, -1.0)
    body = cache.render_gzip(registry.collect())
    assert cache.chunks_rendered == 1 and (cache.rendered, cache.reused) == (1, 0)
    assert gzip.decompress(body) == generate_latest(registry)
    assert cache.render_gzip(registry.collect()) == body and cache.chunks_rendered == 0


@pytest.mark.parametrize("change", [
    pytest.param("insert-first", id="a-row-inserted-shifts-every-chunk"),
    pytest.param("drop-last", id="the-last-row-gone"),
    pytest.param("relabel", id="same-value-other-label"),
    pytest.param("shrink", id="a-whole-chunk-gone"),
    pytest.param("grow", id="a-chunk-added"),
])
def test_every_change_of_the_rows_still_renders_the_full_text(change: str) -> None:
    from txnwatch.metrics.family_cache import CHUNK_ROWS

    source = Big(2 * CHUNK_ROWS + 3)
    registry = _registry(source)
    cache = FamilyCache()
    cache.render_gzip(registry.collect())
    if change == "insert-first":
        source.rows.insert(0, ("a", "t", "0", 1.0))
    elif change == "drop-last":
        source.rows.pop()
    elif change == "relabel":
        group, topic, partition, value = source.rows[7]
        source.rows[7] = (group + "x", topic, partition, value)
    elif change == "shrink":
        del source.rows[CHUNK_ROWS:]
    else:
        source.rows += [("z", "t", int_label(n), 2.0) for n in range(CHUNK_ROWS)]
    assert gzip.decompress(cache.render_gzip(registry.collect())) == generate_latest(registry)
    # Chunks formatted again: every shifted one; none when whole chunks went; the grown last one and the new one.
    assert cache.chunks_rendered == {"insert-first": 3, "drop-last": 1, "relabel": 1, "shrink": 0, "grow": 2}[change]


def test_random_moves_keep_the_body_equal_to_a_full_render() -> None:
    rng = random.Random(25)
    source = Big(2500)
    registry = _registry(source)
    cache = FamilyCache()
    for _ in range(20):
        for _ in range(rng.randrange(4)):
            n = rng.randrange(len(source.rows))
            group, topic, partition, _ = source.rows[n]
            source.rows[n] = (group, topic, partition, float(rng.randrange(-1, 3)))
        if rng.random() < 0.2:
            source.rows.insert(rng.randrange(len(source.rows)), ("new", "t", int_label(rng.randrange(9)), 0.0))
        assert gzip.decompress(cache.render_gzip(registry.collect())) == generate_latest(registry)
