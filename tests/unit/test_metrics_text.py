"""The streamed exposition is byte for byte prometheus-client's, and the gzip-only cache answers both kinds of scrape."""

from __future__ import annotations

import gzip
import math
import subprocess
import time
from collections.abc import Iterable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from tests.deploy.tools import tool
from tests.fixtures.lanes import examples
from txnwatch.metrics.exposition import Exposition
from txnwatch.metrics.render import LINES_PER_SLICE, LeanGauge, int_label, render_gzip, render_text, write_exposition


class Families(Collector):
    """A fixed list of families: both renderers see exactly the same ones."""

    def __init__(self, families: Iterable[Metric]) -> None:
        self.families = list(families)

    def collect(self) -> Iterable[Metric]:
        return iter(self.families)


def _both(names: list[str], rows: Sequence[tuple[tuple[str, ...], float]]) -> tuple[LeanGauge, GaugeMetricFamily]:
    lean = LeanGauge("txnwatch_test_gauge", 'Help with a "quote", a \\ and a\nnewline.', names)
    plain = GaugeMetricFamily("txnwatch_test_gauge", 'Help with a "quote", a \\ and a\nnewline.', labels=names)
    for labels, value in rows:
        lean.add_metric(labels, value)
        plain.add_metric(list(labels), value)
    return lean, plain


LABEL_VALUES = st.text(alphabet=st.sampled_from(['a', 'Z', '0', '"', '\\', '\n', 'n', ',', '=', '{', '}', ' ', 'é',
                                                  '日', '\t']), max_size=6)
VALUES = st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                   st.integers(min_value=-(2**63), max_value=2**63 - 1).map(float),
                   st.sampled_from([0.0, -0.0, 1e-7, 1234567.0, 12345678.0, 1e21]))


@settings(max_examples=examples(150), deadline=None)
@given(rows=st.lists(st.tuples(st.tuples(LABEL_VALUES, LABEL_VALUES, LABEL_VALUES), VALUES), max_size=12))
def test_lean_gauge_lines_equal_generate_latest(rows: list[tuple[tuple[str, ...], float]]) -> None:
    # Label names out of order: generate_latest sorts them, so the lean writer must too.
    lean, plain = _both(["topic", "cluster", "partition"], rows)
    assert render_text(Families([lean])) == generate_latest(Families([plain]))


def test_no_labels_and_many_slices() -> None:
    """A family without labels, and one longer than a slice (the writer flushes every LINES_PER_SLICE lines)."""
    bare, bare_plain = _both([], [((), 1.5)])
    rows = [((f"t{n % 7}", "c", int_label(n)), float(n)) for n in range(LINES_PER_SLICE * 2 + 3)]
    many, many_plain = _both(["topic", "cluster", "partition"], rows)
    pieces: list[bytes] = []
    write_exposition(Families([bare, many]), pieces.append)
    assert len(pieces) > 3
    assert b"".join(pieces) == generate_latest(Families([bare_plain, many_plain]))


def test_a_registry_mixing_lean_gauges_and_prometheus_client_metrics() -> None:
    """Counters and histograms (with their _total, _bucket, _sum lines) go through prometheus-client itself."""
    registry = CollectorRegistry(auto_describe=False)
    Counter("txnwatch_test_events", "Events.", ["cluster"], registry=registry).labels("a").inc(3)
    Histogram("txnwatch_test_seconds", "Times.", ["cluster"], registry=registry, buckets=(0.1, 1)).labels("a").observe(.5)
    lean, plain = _both(["cluster", "topic", "partition"], [(("a", "t", "0"), 7.0), (("a", "t", "1"), math.inf)])
    mixed = Families([*registry.collect(), lean])
    expected = generate_latest(Families([*registry.collect(), plain]))
    assert render_text(mixed) == expected
    assert gzip.decompress(render_gzip(mixed)) == expected


def test_lean_gauge_reads_as_a_prometheus_client_family() -> None:
    lean, plain = _both(["cluster", "partition"], [(("a", int_label(3)), 2.0), (("b", int_label(70_000)), 5.0)])
    assert lean.samples == plain.samples
    registry = CollectorRegistry(auto_describe=False)
    registry.register(Families([lean]))
    assert registry.get_sample_value("txnwatch_test_gauge", {"cluster": "b", "partition": "70000"}) == 5.0
    with pytest.raises(ValueError, match="3 label values"):
        lean.add_metric(("a", "1", "extra"), 1.0)


def test_int_label_shares_small_numbers() -> None:
    assert int_label(7) == "7" and int_label(7) is int_label(int("7"))
    assert int_label(123_456) == "123456" and int_label(-1) == "-1"


def test_promtool_parses_the_render() -> None:
    rows = [((f"topic-{n % 3}", "lab", int_label(n)), float(n * 10)) for n in range(50)]
    lean, _ = _both(["topic", "cluster", "partition"], [*rows, (('we"ird\\', "lab", "0"), -1.0)])
    proc = subprocess.run([tool("promtool"), "check", "metrics"], input=render_text(Families([lean])),
                          capture_output=True, timeout=60)
    assert b"error" not in proc.stdout + proc.stderr, (proc.stdout + proc.stderr).decode()


def test_the_gzip_only_cache_answers_gzip_and_identity_scrapes_alike() -> None:
    """Only the gzip is kept; a scrape without gzip gets it decompressed, equal to rendering the text directly."""
    lean, _ = _both(["cluster", "topic", "partition"], [(("a", "t", int_label(n)), n / 3) for n in range(300)])
    source = Families([lean])
    registry = CollectorRegistry(auto_describe=False)
    registry.register(source)
    published: list[bytes] = []
    exposition = Exposition(registry, on_render=published.append)
    assert gzip.decompress(exposition.body(True)) == exposition.body(False) == generate_latest(registry)  # no thread
    exposition.start()
    try:
        deadline = time.monotonic() + 30
        while not published and time.monotonic() < deadline:  # handed on just after it is kept
            time.sleep(0.02)
        compressed = exposition.cached(True)
        assert compressed is not None and published and published[0] == compressed
        assert exposition.cached(False) is None  # the identity body is made off the event loop, by body()
        assert exposition.body(True) is compressed  # served as kept, not rendered again
        assert exposition.body(False) == gzip.decompress(compressed) == render_text(registry)
    finally:
        exposition.stop()


def test_long_label_values_are_bounded_and_stay_distinct() -> None:
    """Kafka allows 32,767-byte group and transactional ids; Mimir refuses a label value past 2,048 bytes."""
    from prometheus_client.parser import text_string_to_metric_families

    from txnwatch.core.textbounds import LABEL_VALUE_MAX_BYTES

    long_a, long_b, wide = "g" * 32_767, "g" * 32_766 + "h", "日" * 2_000
    gauge = LeanGauge("txnwatch_test_gauge", "Help.", ["consumergroup"])
    for value in (long_a, long_b, wide, "short"):
        gauge.add_metric((value,), 1.0)
    (family,) = text_string_to_metric_families(render_text(Families([gauge])).decode())
    values = [s.labels["consumergroup"] for s in family.samples]
    assert all(len(v.encode()) <= LABEL_VALUE_MAX_BYTES for v in values)
    assert values[0].startswith("g" * 1000) and values[0] != values[1]  # same head, different ids: two series
    assert values[2].startswith("日" * 300) and values[3] == "short"
    # prometheus-client's own readers (get_sample_value) see the same bounded values as the exposition.
    assert [s.labels["consumergroup"] for s in gauge.samples] == values


@given(text=st.text(min_size=0, max_size=600), limit=st.integers(min_value=16, max_value=400))
def test_bound_utf8_keeps_head_and_fits(text: str, limit: int) -> None:
    from txnwatch.core.textbounds import bound_utf8

    bounded = bound_utf8(text, limit)
    assert len(bounded.encode("utf-8", "surrogatepass")) <= limit
    if len(text.encode("utf-8", "surrogatepass")) <= limit:
        assert bounded == text
    else:
        head = bounded.rsplit("…", 1)[0]
        assert text.startswith(head) and bounded == bound_utf8(text, limit)
