"""Apache ECharts options for the console's charts, built server-side as plain data.

The page only hands each option to ``echarts.init(el).setOption(option)``: everything a
chart shows (series, marked stall episodes, fence lines) is configuration, so no chart
code is written by hand and these functions are unit-tested like any other pure code.
Times are epoch milliseconds, shown in UTC like the rest of the console.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from txnwatch.core.epoch import to_ms
from txnwatch.core.vocabulary import TxnEvent, TxnState

STALL_AREA = "rgba(214, 39, 40, 0.14)"
FENCE_COLOR = "#d62728"
# Bottom to top: the happy path low, trouble high, so a stuck or fenced id stands out.
STATE_AXIS: tuple[str, ...] = tuple(s.value for s in (
    TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT, TxnState.ONGOING, TxnState.PREPARE_COMMIT,
    TxnState.PREPARE_ABORT, TxnState.PREPARE_EPOCH_FENCE, TxnState.DEAD, TxnState.UNKNOWN))


def _base(y_name: str) -> dict[str, Any]:
    return {"animation": False, "useUTC": True, "tooltip": {"trigger": "axis"},
            "legend": {"top": 0}, "grid": {"left": 80, "right": 60, "top": 40, "bottom": 70},
            "xAxis": {"type": "time"}, "yAxis": [{"type": "value", "name": y_name, "scale": True}],
            "dataZoom": [{"type": "inside"}, {"type": "slider", "height": 20, "bottom": 10}]}


@dataclass(frozen=True, slots=True)
class OffsetPoint:
    at: datetime
    high_watermark: int | None
    last_stable_offset: int | None


@dataclass(frozen=True, slots=True)
class Episode:
    """A stretch of time marked on a chart: an LSO stall with the producer that blocks it."""

    start: datetime
    end: datetime
    label: str


def fitted_window(window: tuple[datetime, datetime], starts: Sequence[datetime]) -> tuple[datetime, datetime]:
    """The chosen range (1 h, 6 h, 24 h) cut to where the data begins, with a margin of a tenth of what is
    shown: three minutes of a demo filled the right 3 % of an hour-wide axis.  Never wider than the choice;
    the whole choice when there is no data."""
    begin, end = window
    inside = [at for at in starts if at is not None]
    if not inside:
        return window
    first = max(begin, min(inside))
    margin = max((end - first) / 10, timedelta(seconds=30))
    return max(begin, first - margin), end


def partition_offsets(points: Sequence[OffsetPoint], stalls: Sequence[Episode],
                      hanging: Sequence[tuple[datetime, int, str]],
                      window: tuple[datetime, datetime] | None = None) -> dict[str, Any]:
    """HWM vs LSO over time; stall episodes shaded and hanging transactions pinned at their start offset.

    The time axis spans the chosen window cut to the data (:func:`fitted_window`), so a stall that began
    before the first sample still shows where it began.  Nothing is printed over the lines: the names of
    episodes and pins show in the tooltip when pointed at (and in the episode table below the chart), so
    labels never clip or overlap one another or the lines; the label layout hides any that would."""
    option = _base("offset")
    option["tooltip"] = {"trigger": "axis", "confine": True}
    if window is not None:
        begin, end = fitted_window(window, [*(p.at for p in points), *(s.start for s in stalls),
                                            *(at for at, _, _ in hanging)])
        option["xAxis"].update(min=to_ms(begin), max=to_ms(end))
    lso_series: dict[str, Any] = {
        "name": "last stable offset (read_committed)", "type": "line", "step": "end", "showSymbol": False,
        "data": [[to_ms(p.at), p.last_stable_offset] for p in points],
        "labelLayout": {"hideOverlap": True},
        "markArea": {"itemStyle": {"color": STALL_AREA}, "label": {"show": False},
                     "emphasis": {"label": {"show": True, "position": "insideTop"}},
                     "tooltip": {"trigger": "item", "formatter": "{b}"},
                     "data": [[{"name": s.label, "xAxis": to_ms(s.start)}, {"xAxis": to_ms(s.end)}] for s in stalls]},
    }
    if hanging:
        lso_series["markPoint"] = {"symbol": "pin", "symbolSize": 28, "symbolOffset": [0, "-50%"],
                                   "itemStyle": {"color": FENCE_COLOR}, "label": {"show": False},
                                   "tooltip": {"trigger": "item", "formatter": "{b}"},
                                   "data": [{"name": label, "coord": [to_ms(at), offset]}
                                            for at, offset, label in hanging]}
    option["series"] = [
        {"name": "high watermark", "type": "line", "step": "end", "showSymbol": False,
         "data": [[to_ms(p.at), p.high_watermark] for p in points]},
        lso_series,
    ]
    return option


def group_lag(points: Sequence[tuple[datetime, int | None, int | None, int | None]],
              window: tuple[datetime, datetime] | None = None) -> dict[str, Any]:
    """A group's lag over time, (sampled at, offset lag vs LSO, vs HWM, records) per sample: the two offset lags
    and, beside them, the records a read_committed consumer still receives (a gap where a sample was not
    counted)."""
    option = _base("lag")
    option["tooltip"] = {"trigger": "axis", "confine": True}
    if window is not None:
        begin, end = fitted_window(window, [at for at, _, _, _ in points])
        option["xAxis"].update(min=to_ms(begin), max=to_ms(end))
    option["series"] = [
        {"name": name, "type": "line", "showSymbol": False, "connectNulls": False,
         "data": [[to_ms(point[0]), point[column]] for point in points]}
        for name, column in (("offset lag vs HWM", 2), ("offset lag vs LSO", 1),
                             ("records (read_committed)", 3))]
    return option


@dataclass(frozen=True, slots=True)
class StatePoint:
    at: datetime
    state: str
    producer_id: int
    producer_epoch: int
    events: Sequence[str]


def _event_label(point: StatePoint) -> str | None:
    if TxnEvent.FENCED in point.events:
        return f"fenced: producer {point.producer_id} epoch {point.producer_epoch}"
    if TxnEvent.TIMEOUT_ABORT in point.events:
        return "coordinator timeout abort"
    if TxnEvent.PRODUCER_ID_CHANGE in point.events:
        return f"new producer id {point.producer_id}"
    return None


def transaction_timeline(points: Sequence[StatePoint], now: datetime) -> dict[str, Any]:
    """States over time as a step line (one level per coordinator state), the producer epoch beside it,
    and a vertical line at every fence, coordinator-timeout abort and producer id change."""
    option = _base("state")
    option["yAxis"] = [{"type": "category", "name": "state", "data": list(STATE_AXIS)},
                       {"type": "value", "name": "epoch", "minInterval": 1, "scale": True, "position": "right"}]
    states = [[to_ms(p.at), p.state if p.state in STATE_AXIS else TxnState.UNKNOWN.value] for p in points]
    epochs = [[to_ms(p.at), p.producer_epoch] for p in points]
    if points:  # the last state holds until now
        states.append([to_ms(now), states[-1][1]])
        epochs.append([to_ms(now), epochs[-1][1]])
    marks = [{"name": label, "xAxis": to_ms(p.at)} for p in points if (label := _event_label(p))]
    option["series"] = [
        {"name": "coordinator state", "type": "line", "step": "end", "symbolSize": 7, "data": states,
         "markLine": {"symbol": "none", "lineStyle": {"color": FENCE_COLOR, "type": "dashed"},
                      "label": {"formatter": "{b}", "position": "insideEndTop"}, "data": marks}},
        {"name": "producer epoch", "type": "line", "step": "end", "yAxisIndex": 1, "showSymbol": False,
         "data": epochs},
    ]
    return option
