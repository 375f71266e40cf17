"""The Prometheus text exposition written family by family into a sink (a gzip stream), and a lean gauge family.

At 80,000 partitions /metrics has ~700,000 series.  prometheus-client's ``GaugeMetricFamily`` keeps
one ``Sample`` (a named tuple with its own label dict) per series, and ``generate_latest`` one string
per series until it joins them, then the joined text and its UTF-8 copy: the render peaked 330 MB
above the state it shows, 191 MB of it the families alone (docs/performance.md).  Here:

* :class:`LeanGauge` is a gauge family that keeps, per series, a reference to a label-value tuple
  (which the collectors share between the families of one partition or group partition) and a
  double in an ``array``: ~16 bytes a series instead of ~280;
* label values are bounded to :data:`~txnwatch.core.textbounds.LABEL_VALUE_MAX_BYTES` UTF-8 bytes (a
  longer one keeps its head, ``…`` and a hash, so distinct ids stay distinct series);
* :func:`write_exposition` writes the same bytes as ``generate_latest`` (every family that is not a
  LeanGauge is written by ``generate_latest`` itself, one family at a time; a LeanGauge's lines are
  formatted as ``generate_latest`` formats them) in slices of a few thousand lines, so the only
  whole copy is what the sink keeps: with :func:`render_gzip`, the compressed bytes (~25x smaller).

A LeanGauge still has ``samples`` (built on demand), so prometheus-client's own tools —
``generate_latest``, ``CollectorRegistry.get_sample_value`` — read it as any other family.
"""

from __future__ import annotations

import zlib
from array import array
from collections.abc import Callable, Iterable, Sequence

from prometheus_client import generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.openmetrics.exposition import _is_valid_legacy_metric_name, escape_label_name
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

from txnwatch.core.textbounds import LABEL_VALUE_MAX_BYTES, bound_utf8

GZIP_LEVEL = 6  # ~25x smaller Prometheus text; level 9 costs twice the CPU for a few per cent
LINES_PER_SLICE = 4096  # ~0.4 MB of text per write into the sink

_SMALL_INTS = tuple(str(n) for n in range(4096))


def bound_label(value: str) -> str:
    """A label value of at most LABEL_VALUE_MAX_BYTES: tenants name groups and transactional ids with up to
    32,767 bytes, and Mimir refuses a whole series whose label value passes its limit (2,048 by default)."""
    return bound_utf8(value, LABEL_VALUE_MAX_BYTES)


def int_label(n: int) -> str:
    """``str(n)`` for label values such as partition numbers, one shared string per number below 4096."""
    return _SMALL_INTS[n] if 0 <= n < 4096 else str(n)


class LeanGauge(Metric):
    """A gauge family of many series: label-value tuples (shared, not copied) and values in a double array.

    ``add_metric`` takes the label values in the order of ``labels``, as ``GaugeMetricFamily`` does; pass
    the same tuple to every family of one object (a partition's offsets, a group partition's lags) and
    the series of all of them cost one tuple.  Values are stored as doubles, which is what the exposition
    prints (``floatToGoString`` converts every value to a float).
    """

    def __init__(self, name: str, documentation: str, labels: Sequence[str]) -> None:
        super().__init__(name, documentation, "gauge")
        self.labelnames = tuple(labels)
        self.rows: list[tuple[str, ...]] = []
        self.values = array("d")

    def add_metric(self, labels: Sequence[str], value: float) -> None:
        row = labels if type(labels) is tuple else tuple(labels)
        if len(row) != len(self.labelnames):
            raise ValueError(f"{self.name}: {len(row)} label values for labels {self.labelnames}")
        self.rows.append(row)
        self.values.append(value)

    @property  # Metric.samples is a plain list attribute; built on demand here
    def samples(self) -> list[Sample]:
        names = self.labelnames
        return [Sample(self.name, {name: bound_label(v) for name, v in zip(names, row, strict=True)}, value, None)
                for row, value in zip(self.rows, self.values, strict=True)]

    @samples.setter
    def samples(self, value: list[Sample]) -> None:
        if value:  # Metric.__init__ sets []; samples are added with add_metric only
            raise AttributeError("LeanGauge samples are added with add_metric")


class _One(Collector):
    def __init__(self, metric: Metric) -> None:
        self._metric = metric

    def collect(self) -> Iterable[Metric]:
        return (self._metric,)


def _escape_value(value: str) -> str:
    """A label value as generate_latest escapes it (backslash, newline, double quote)."""
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def is_lean(metric: Metric) -> bool:
    """Formatted here (lean_header + lean_rows), not by prometheus-client: a LeanGauge with a legacy name."""
    return isinstance(metric, LeanGauge) and _is_valid_legacy_metric_name(metric.name)


def lean_header(family: LeanGauge) -> bytes:
    """The header exactly as generate_latest writes it, from an empty family with the same name and help."""
    return generate_latest(_One(GaugeMetricFamily(family.name, family.documentation)))


def _lean_lines(family: LeanGauge, sink: Callable[[bytes], object], escaped: dict[str, str]) -> None:
    sink(lean_header(family))
    lean_rows(family, 0, len(family.rows), sink, escaped)


def lean_rows(family: LeanGauge, start: int, stop: int, sink: Callable[[bytes], object],
              escaped: dict[str, str]) -> None:
    """The lines of rows ``start:stop`` (a family's text is its header, then every row's line, in order)."""
    names = family.labelnames
    order = sorted(range(len(names)), key=names.__getitem__)  # generate_latest sorts labels by name
    keys = [f'{escape_label_name(names[i])}="' for i in order]
    prefix, fmt = family.name, floatToGoString
    buffer: list[str] = []
    for row, value in zip(family.rows[start:stop], family.values[start:stop], strict=True):
        if keys:
            parts = []
            for key, i in zip(keys, order, strict=True):
                raw = row[i]
                text = escaped.get(raw)
                if text is None:
                    text = escaped[raw] = _escape_value(bound_label(raw))
                parts.append(f'{key}{text}"')
            buffer.append(f"{prefix}{{{','.join(parts)}}} {fmt(value)}\n")
        else:
            buffer.append(f"{prefix} {fmt(value)}\n")
        if len(buffer) >= LINES_PER_SLICE:
            sink("".join(buffer).encode("utf-8"))
            buffer.clear()
    if buffer:
        sink("".join(buffer).encode("utf-8"))


def write_exposition(registry: Collector, sink: Callable[[bytes], object]) -> None:
    """The registry's exposition, byte for byte what ``generate_latest(registry)`` returns, in pieces into ``sink``.

    Families are written as the registry yields them and dropped after; a LeanGauge is formatted here
    (its name must be a legacy Prometheus name, which every txnwatch name is), any other family by
    prometheus-client on its own.
    """
    escaped: dict[str, str] = {}  # label values repeat (cluster, topic, group): escape each once per render
    for metric in registry.collect():
        write_family(metric, sink, escaped)


def write_family(metric: Metric, sink: Callable[[bytes], object], escaped: dict[str, str]) -> None:
    """One family's lines into ``sink`` (``escaped``: label values already escaped in this render)."""
    if is_lean(metric):
        assert isinstance(metric, LeanGauge)
        _lean_lines(metric, sink, escaped)
    else:
        sink(generate_latest(_One(metric)))


def render_text(registry: Collector) -> bytes:
    """The whole exposition as one bytes object (for the rare scrape that does not accept gzip)."""
    pieces: list[bytes] = []
    write_exposition(registry, pieces.append)
    return b"".join(pieces)


def render_gzip(registry: Collector, level: int = GZIP_LEVEL) -> bytes:
    """The exposition as a gzip member, compressed as it is written: the text is never whole in memory."""
    compressor = zlib.compressobj(level, zlib.DEFLATED, 16 + zlib.MAX_WBITS)  # 16 +: a gzip header and trailer
    pieces: list[bytes] = []

    def sink(data: bytes) -> None:
        out = compressor.compress(data)
        if out:
            pieces.append(out)

    write_exposition(registry, sink)
    pieces.append(compressor.flush())
    return b"".join(pieces)
