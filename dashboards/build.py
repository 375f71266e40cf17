#!/usr/bin/env python3
"""Builds txnwatch's Grafana dashboards with Grafana's foundation SDK and syncs the chart.

The single source of truth for dashboards is this file; for Prometheus alert rules it is
deploy/prometheus/txnwatch-rules.yaml.  Panels, variables, links and annotations are built with
grafana-foundation-sdk's typed builders (the Grafana 11.6 schema; a build-time need only: the
``dashboards`` extra), so a misspelt option or a wrong type fails here, not in Grafana.
`python dashboards/build.py` writes

* dashboards/<name>.json                       (committed, importable by hand)
* helm/txnwatch/files/dashboards/<name>.json   (copy the chart reads with .Files.Glob)
* helm/txnwatch/files/txnwatch-rules.yaml      (copy for the chart's PrometheusRule)
* service/txnwatch/serve/console/grafana_panels.json (panel ids the console links to)

`python dashboards/build.py --check` exits 1 if any of them is out of date
(tests/deploy/test_rules_and_dashboards.py runs it).  Metric names: docs/metrics.md.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from grafana_foundation_sdk.builders import bargauge as bargauge_panel
from grafana_foundation_sdk.builders import common as cb
from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.builders import heatmap as heatmap_panel
from grafana_foundation_sdk.builders import prometheus, statetimeline, timeseries
from grafana_foundation_sdk.builders import stat as stat_panel
from grafana_foundation_sdk.builders import table as table_panel
from grafana_foundation_sdk.builders.heatmap import YAxisConfig as HeatmapYAxis
from grafana_foundation_sdk.cog.builder import Builder
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common as cm
from grafana_foundation_sdk.models import dashboard as dm
from grafana_foundation_sdk.models import heatmap as hm
from grafana_foundation_sdk.models.common import AxisPlacement
from grafana_foundation_sdk.models.dashboard import Dashboard
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "service"))  # the one vocabulary (alert names, runbook anchors, reasons)
from txnwatch.core.vocabulary import BY_RULE, REASONS  # noqa: E402

OUT = ROOT / "dashboards"
CHART_FILES = ROOT / "helm" / "txnwatch" / "files"
RULES = ROOT / "deploy" / "prometheus" / "txnwatch-rules.yaml"
CONSOLE_PANELS = ROOT / "service" / "txnwatch" / "serve" / "console" / "grafana_panels.json"

DS = dm.DataSourceRef(type_val="prometheus", uid="${datasource}")
C = 'cluster=~"$cluster"'
CT = 'cluster=~"$cluster",topic=~"$topic"'
CG = 'cluster=~"$cluster",consumergroup=~"$group",topic=~"$topic"'
# Where on-call opens txnwatch's console and runbooks; a dashboard variable, so a provisioner sets it once.
TXNWATCH = "${txnwatch_url}"
# Human column names for table panels (Prometheus labels and the instant value).
COLUMNS = {"cluster": "Cluster", "topic": "Topic", "partition": "Partition", "producer_id": "Producer id",
           "transactional_id": "Transactional id", "reason": "Why it hangs", "start_offset": "Start offset (abort at)",
           "state": "State", "consumergroup": "Consumer group", "framework": "Framework",
           "application": "Application (Streams application.id, Flink sink prefix)", "subtask": "Subtask",
           "checkpoint": "Checkpoint (or pool slot)"}
RI = "$__rate_interval"
PanelBuilder = Any  # every panel builder of the SDK: the setters below are common to all of them


# ---- panel helpers -----------------------------------------------------------------------

def target(expr: str, legend: str = "", instant: bool = False, fmt: str = "time_series") -> prometheus.Dataquery:
    query = (prometheus.Dataquery().datasource(DS).expr(expr).legend_format(legend or "__auto")
             .format(PromQueryFormat(fmt)))
    return query.instant() if instant else query


def thresholds(*steps: tuple[float | None, str]) -> db.ThresholdsConfig:
    return (db.ThresholdsConfig().mode(dm.ThresholdsMode.ABSOLUTE)
            .steps([dm.Threshold(value=value, color=color) for value, color in steps]))


OK_RED = thresholds((None, "green"), (1, "red"))


def link(title: str, url: str) -> db.DashboardLink:
    return db.DashboardLink(title).type(dm.DashboardLinkType.LINK).url(url).target_blank(True)


def panel(p: PanelBuilder, title: str, description: str, targets: Sequence[prometheus.Dataquery], *,
          unit: str = "short", thr: db.ThresholdsConfig | None = None, w: int = 12, h: int = 8,
          overrides: list[db.DashboardFieldConfigSourceOverrides] | None = None,
          runbook: str | None = None) -> PanelBuilder:
    """What every panel has: the data source, its queries (refIds A, B, ...), unit, thresholds, size, links to the
    console (and the runbook of ``runbook``'s alert)."""
    p = p.title(title).description(description).datasource(DS).unit(unit).thresholds(thr or thresholds((None, "green")))
    for i, query in enumerate(targets):
        p = p.with_target(query.ref_id(chr(ord("A") + i)))
    links = [link("txnwatch console: what hangs and stalls now", f"{TXNWATCH}/console")]
    if runbook is not None:
        alert = BY_RULE[runbook]
        links.insert(0, link(f"Runbook: {alert.title} ({alert.prometheus})",
                             f"{TXNWATCH}/console/runbooks#{alert.anchor}"))
    return p.span(w).height(h).overrides(overrides or []).links(links)


def override(matcher: str, options: str, prop: str, value: Any) -> db.DashboardFieldConfigSourceOverrides:
    """Field overrides: the fields ``matcher`` (byName, byRegexp) matches with ``options`` get ``prop`` = ``value``."""
    return (db.DashboardFieldConfigSourceOverrides().matcher(dm.MatcherConfig(id_val=matcher, options=options))
            .properties([dm.DynamicConfigValue(id_val=prop, value=value)]))


REDUCE_LAST = cb.ReduceDataOptions().calcs(["lastNotNull"]).fields("").values(False)


def color(mode: dm.FieldColorModeId) -> db.FieldColor:
    return db.FieldColor().mode(mode)


def stat(title: str, description: str, expr: str, *, unit: str = "short", thr: db.ThresholdsConfig | None = None,
         w: int = 4, legend: str = "", runbook: str | None = None) -> PanelBuilder:
    p = (stat_panel.Panel().reduce_options(REDUCE_LAST).color_mode(cm.BigValueColorMode.BACKGROUND)
         .graph_mode(cm.BigValueGraphMode.NONE).text_mode(cm.BigValueTextMode.AUTO)
         .color_scheme(color(dm.FieldColorModeId.THRESHOLDS)))
    return panel(p, title, description, [target(expr, legend, instant=True)], unit=unit, thr=thr, w=w, h=4,
                 runbook=runbook)


def ts(title: str, description: str, *targets: prometheus.Dataquery, unit: str = "short",
       thr: db.ThresholdsConfig | None = None, w: int = 12, stack: bool = False, runbook: str | None = None) -> PanelBuilder:
    p = (timeseries.Panel().draw_style(cm.GraphDrawStyle.LINE).line_width(1).fill_opacity(10)
         .show_points(cm.VisibilityMode.NEVER).color_scheme(color(dm.FieldColorModeId.PALETTE_CLASSIC))
         .thresholds_style(cb.GraphThresholdsStyleConfig().mode(cm.GraphThresholdsStyleMode.LINE if thr
                                                                else cm.GraphThresholdsStyleMode.OFF))
         .legend(cb.VizLegendOptions().show_legend(True).display_mode(cm.LegendDisplayMode.TABLE)
                 .placement(cm.LegendPlacement.BOTTOM).calcs(["lastNotNull", "max"]))
         .tooltip(cb.VizTooltipOptions().mode(cm.TooltipDisplayMode.MULTI).sort(cm.SortOrder.DESCENDING)))
    if stack:
        p = p.stacking(cb.StackingConfig().mode(cm.StackingMode.NORMAL).group("A"))
    return panel(p, title, description, targets, unit=unit, thr=thr, w=w, runbook=runbook)


def table(title: str, description: str, expr: str, *, unit: str = "short", thr: db.ThresholdsConfig | None = None,
          w: int = 24, h: int = 8, hide: tuple[str, ...] = (), value: str = "Value", runbook: str | None = None,
          overrides: list[db.DashboardFieldConfigSourceOverrides] | None = None) -> PanelBuilder:
    """An instant table; columns get human names (COLUMNS) and the value column is called ``value``."""
    excluded = {"Time": True, "__name__": True, "job": True, "instance": True, **dict.fromkeys(hide, True)}
    p = (table_panel.Panel().show_header(True).sort_by([cb.TableSortByFieldState().display_name(value).desc(True)])
         .with_transformation(dm.DataTransformerConfig(id_val="organize", options={
             "excludeByName": excluded, "renameByName": {**COLUMNS, "Value": value}})))
    if thr:
        p = p.cell_options(cm.TableColoredBackgroundCellOptions(mode=cm.TableCellBackgroundDisplayMode.BASIC))
    return panel(p, title, description, [target(expr, instant=True, fmt="table")], unit=unit, thr=thr, w=w, h=h,
                 runbook=runbook, overrides=overrides)


def state_timeline(title: str, description: str, expr: str, legend: str, states: dict[str, tuple[str, str]],
                   *, w: int = 12, h: int = 8, runbook: str | None = None) -> PanelBuilder:
    """One row per series, coloured by value: states maps a value to (text, colour)."""
    mappings = dm.ValueMap(options={value: dm.ValueMappingResult(text=text, color=color, index=i)
                                    for i, (value, (text, color)) in enumerate(states.items())})
    p = (statetimeline.Panel().show_value(cm.VisibilityMode.NEVER).merge_values(True).row_height(0.8)
         .align_value(cm.TimelineValueAlignment.LEFT).fill_opacity(80).line_width(0).mappings([mappings])
         .legend(cb.VizLegendOptions().show_legend(True).display_mode(cm.LegendDisplayMode.LIST)
                 .placement(cm.LegendPlacement.BOTTOM))
         .color_scheme(color(dm.FieldColorModeId.THRESHOLDS)))
    return panel(p, title, description, [target(expr, legend)], w=w, h=h, runbook=runbook)


def bargauge(title: str, description: str, query: prometheus.Dataquery, *, thr: db.ThresholdsConfig,
             overrides: list[db.DashboardFieldConfigSourceOverrides]) -> PanelBuilder:
    p = (bargauge_panel.Panel().orientation(cm.VizOrientation.HORIZONTAL).display_mode(cm.BarGaugeDisplayMode.GRADIENT)
         .reduce_options(REDUCE_LAST).color_scheme(color(dm.FieldColorModeId.THRESHOLDS)))
    return panel(p, title, description, [query], thr=thr, overrides=overrides)


def heatmap(title: str, description: str, query: prometheus.Dataquery, *, scheme: str, y_axis: HeatmapYAxis,
            w: int, h: int = 8, steps: int = 64, legend_and_tooltip: bool = False) -> PanelBuilder:
    """Buckets as the query returns them (no calculation), coloured by a scheme in ``steps`` (Grafana's default 64)."""
    p = (heatmap_panel.Panel().calculate(False).cell_gap(1).y_axis(y_axis)
         .color(heatmap_panel.HeatmapColorOptions().mode(hm.HeatmapColorMode.SCHEME).scheme(scheme).steps(steps)))
    if legend_and_tooltip:
        p = p.show_legend().mode(cm.TooltipDisplayMode.SINGLE).hide_y_histogram()
    return panel(p, title, description, [query], w=w, h=h)


def stable_top(n: int, metric: str, labels: str, on: str = "cluster, topic, partition") -> str:
    """The top ``n`` series of the whole time range (chosen once, at its end), not of each instant: a top-N
    evaluated per step makes partitions jump in and out of the panel.  ``on``: the labels that name one series."""
    return (f"{metric}{{{labels}}} and on ({on}) "
            f"topk({n}, max_over_time({metric}{{{labels}}}[$__range] @ end()))")


REASON_MAPPINGS = [dm.ValueMap(options={r.value: dm.ValueMappingResult(text=t.title, index=i)
                                        for i, (r, t) in enumerate(REASONS.items())})]


def row(title: str) -> db.Row:
    return db.Row(title).collapsed(False)


def layout(panels: Sequence[PanelBuilder | db.Row]) -> list[dm.Panel | dm.RowPanel]:
    """Builds the panels and assigns ids and x/y positions left to right, wrapping at 24 columns (the SDK's own
    placement lets a panel overflow the row)."""
    x = y = row_h = 0
    built: list[dm.Panel | dm.RowPanel] = []
    for i, builder in enumerate(panels, start=1):
        p = builder.build()
        g = p.grid_pos if p.grid_pos is not None else dm.GridPos(h=1, w=24)
        is_row = isinstance(p, dm.RowPanel)
        if is_row or x + g.w > 24:
            x, y, row_h = 0, y + row_h, 0
        p.grid_pos, p.id_val = dm.GridPos(h=g.h, w=g.w, x=x, y=y), i
        x, row_h = x + g.w, max(row_h, g.h)
        if is_row:
            x, y, row_h = 0, y + g.h, 0
        built.append(p)
    return built


class PrometheusAnnotation(dm.AnnotationQuery):
    """An annotation from a PromQL expression.  The Prometheus data source reads ``step``, ``titleFormat``,
    ``textFormat`` and ``useValueForTime`` from the annotation itself; the SDK's AnnotationQuery does not carry
    them (its schema: "TODO.. this should just be a normal query target"), so they are added here."""

    def __init__(self, name: str, expr: str, icon_color: str, title_format: str, text_format: str) -> None:
        super().__init__(name=name, datasource=DS, enable=True, icon_color=icon_color, expr=expr, hide=None,
                         built_in=None)
        self.title_format, self.text_format = title_format, text_format

    def to_json(self) -> dict[str, object]:
        return {**super().to_json(), "step": "60s", "titleFormat": self.title_format,
                "textFormat": self.text_format, "useValueForTime": False}


ANNOTATIONS = [
    PrometheusAnnotation("Alerts firing", f"sum by (cluster, alertname, severity) (txnwatch_alerts_firing{{{C}}}) > 0",
                         "red", "{{alertname}} firing", "{{cluster}} ({{severity}})"),
    PrometheusAnnotation("LSO stall episodes",
                         f"sum by (cluster, topic, partition, producer_id, transactional_id, start_offset) "
                         f"(txnwatch_lso_stall_duration_seconds{{{C}}}) > 0", "orange",
                         "LSO stalled: {{topic}}-{{partition}}",
                         "{{cluster}}: held by producer {{producer_id}} {{transactional_id}} at offset {{start_offset}}"),
]
ALL = dm.VariableOption(text="All", value="$__all")


def query_variable(name: str, label: str, query: str) -> db.QueryVariable:
    return (db.QueryVariable(name).label(label).datasource(DS).query({"query": query, "refId": name})
            .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED).multi(True).include_all(True).all_value(".*")
            .current(ALL).sort(dm.VariableSort.ALPHABETICAL_ASC).hide(dm.VariableHide.DONT_HIDE).options([]))


def dashboard(uid: str, title: str, description: str, panels: Sequence[PanelBuilder | db.Row], *,
              topic: bool = False, group: bool = False) -> Dashboard:
    variables: list[Builder[dm.VariableModel]] = [
        db.DatasourceVariable("datasource").label("Data source").type("prometheus").hide(dm.VariableHide.DONT_HIDE)
        .regex(""),
        query_variable("cluster", "Kafka cluster", "label_values(txnwatch_cluster_up, cluster)")]
    if topic:
        variables.append(query_variable("topic", "Topic", f"label_values(txnwatch_partition_lso_gap{{{C}}}, topic)"))
    if group:
        variables.append(query_variable("group", "Consumer group",
                                        f"label_values(txnwatch_consumergroup_topic_lag_lso{{{C}}}, consumergroup)"))
    url = "http://127.0.0.1:8080"
    variables.append(db.TextBoxVariable("txnwatch_url").label("txnwatch URL").default_value(url)
                     .current(dm.VariableOption(text=url, value=url)).hide(dm.VariableHide.HIDE_VARIABLE)
                     .description("Base URL of the txnwatch API/console; panel links open its console and runbooks."))
    built_in = dm.AnnotationQuery(name="Annotations & Alerts", datasource=dm.DataSourceRef(type_val="grafana",
                                  uid="-- Grafana --"), enable=True, hide=True, icon_color="rgba(0, 211, 255, 1)",
                                  type_val="dashboard", built_in=1)
    dash = (db.Dashboard(title).uid(uid).description(description).version(1).tags(["txnwatch", "kafka", "transactions"])
            .editable().timezone(cm.TimeZoneUtc).refresh("30s").time("now-6h", "now")
            .tooltip(dm.DashboardCursorSync.CROSSHAIR)
            .links([db.DashboardLink("txnwatch").type(dm.DashboardLinkType.DASHBOARDS).tags(["txnwatch"])
                    .as_dropdown(True).include_vars(True).keep_time(True)])
            .variables(variables).build())
    dash.annotations = dm.AnnotationContainer(list_val=[built_in, *ANNOTATIONS])
    dash.panels = layout(panels)
    return dash


# ---- dashboards ----------------------------------------------------------------------------

OPEN = 'state=~"Ongoing|PrepareCommit|PrepareAbort"'


def overview() -> Dashboard:
    return dashboard("txnwatch-overview", "txnwatch / Overview",
                     "Kafka transactions at a glance: is every cluster polled, is anything hanging or stalled.", [
        stat("Clusters down", "Clusters whose latest poll reached no broker. Red: see the TxnwatchClusterUnreachable "
             "runbook (docs/runbooks.md) — check the cluster and txnwatch's credentials.",
             f"count(txnwatch_cluster_up{{{C}}} == 0) or vector(0)", thr=OK_RED, runbook="cluster_down"),
        stat("Hanging transactions", "Open transactions the coordinator cannot finish; their partitions' LSO is pinned. "
             "Red: follow the KafkaHangingTransaction runbook and abort them (kafka-transactions.sh abort).",
             f"sum(txnwatch_hanging_transactions{{{C}}}) or vector(0)", thr=OK_RED, runbook="hanging_transaction"),
        stat("Active LSO stalls", "Partitions whose LSO is not moving while producers write: read_committed consumers "
             "are stuck. Red: open Partitions & LSO to find the blocking transactional id.",
             f"sum(txnwatch_lso_stalls{{{C}}}) or vector(0)", thr=OK_RED, runbook="lso_stall"),
        stat("Open transactions", "Transactions in Ongoing or Prepare* state right now. Informational.",
             f"sum(txnwatch_transactions{{{C},{OPEN}}})"),
        stat("Oldest open transaction", "Age of the oldest open transaction. Yellow above 1 min (the default "
             "transaction.timeout.ms), red above 15 min (transaction.max.timeout.ms): look at Transactions.",
             f"max(txnwatch_transaction_oldest_open_age_seconds{{{C}}})", unit="s",
             thr=thresholds((None, "green"), (60, "yellow"), (900, "red"))),
        stat("Alerts firing", "Incidents txnwatch's built-in evaluator is firing (and paging for). Red: check "
             "/api/v1/alerts and the runbooks.", f"sum(txnwatch_alerts_firing{{{C}}}) or vector(0)", thr=OK_RED),
        state_timeline("Cluster up / down", "Green while polls reach the cluster, red while they reach no broker. "
                       "Red for minutes pages: follow the TxnwatchClusterUnreachable runbook.",
                       f"txnwatch_cluster_up{{{C}}}", "{{cluster}}", {"1": ("up", "green"), "0": ("down", "red")},
                       w=8, runbook="cluster_down"),
        ts("Alerts firing by rule", "Built-in alerts currently firing, by rule. Anything here means someone should "
           "be looking at it: follow the rule's runbook.",
           target(f"sum by (cluster, alertname, severity) (txnwatch_alerts_firing{{{C}}}) > 0",
                  "{{cluster}} {{alertname}} ({{severity}})"), w=8),
        ts("Hanging transactions and LSO stalls", "Counts over time. Red (non-zero) for more than a few minutes means "
           "read_committed consumers are stuck: abort the hanging transaction or fix the blocking producer.",
           target(f"sum by (cluster) (txnwatch_hanging_transactions{{{C}}})", "{{cluster}} hanging"),
           target(f"sum by (cluster) (txnwatch_lso_stalls{{{C}}})", "{{cluster}} LSO stalls"), thr=OK_RED, w=8),
        row("txnwatch itself"),
        ts("Poll duration", "Wall time of one poll of a cluster. Red when it nears the poll interval (15 s by "
           "default): polls would fall behind; raise request timeouts or narrow topics_include.",
           target(f"txnwatch_poll_duration_seconds{{{C}}}", "{{cluster}}"), unit="s",
           thr=thresholds((None, "green"), (10, "yellow"), (15, "red")), w=8),
        ts("Kafka request errors", "Failed requests per second by Kafka API. Steady errors on one API point at "
           "ACLs (DescribeTransactions/DescribeProducers need DESCRIBE on transactional ids / topics) or a bad broker.",
           target(f"sum by (cluster, api) (rate(txnwatch_request_errors_total{{{C}}}[{RI}]))", "{{cluster}} {{api}}"),
           unit="reqps", w=8),
        ts("Database, leader and outbox", "db up = 1 when the latest DB write succeeded (red at 0: see "
           "TxnwatchDatabaseDown); outbox = notifications waiting for PagerDuty (should drain to 0).",
           target("max(txnwatch_db_up)", "db up"), target("max(txnwatch_leader)", "replica leading"),
           target("max(txnwatch_outbox_pending)", "outbox pending"),
           target("max(txnwatch_outbox_oldest_pending_age_seconds)", "oldest pending (s)"), w=8),
    ])


def transactions() -> Dashboard:
    return dashboard("txnwatch-transactions", "txnwatch / Transactions",
                     "Coordinator view of transactions: states, ages, outcomes and the oldest transactional ids.", [
        stat("Open past their timeout", "Transactions open longer than their own transaction.timeout.ms: the "
             "coordinator should have aborted them. Red: KafkaTransactionPastTimeout runbook.",
             f"sum(txnwatch_transactions_past_timeout{{{C}}}) or vector(0)", thr=OK_RED, w=6,
             runbook="transaction_timeout_exceeded"),
        stat("Stuck in Prepare*", "Age of the oldest PrepareCommit/PrepareAbort transaction. Red above 60 s: markers "
             "are not written — check partition leaders (KafkaTransactionStuckInPrepare runbook).",
             f'max(txnwatch_transaction_oldest_age_seconds{{{C},state=~"PrepareCommit|PrepareAbort"}})', unit="s",
             thr=thresholds((None, "green"), (10, "yellow"), (60, "red")), w=6, runbook="prepare_stuck"),
        stat("Commits / s", "Committed transactions per second (observed by polling).",
             f"sum(rate(txnwatch_transaction_commits_total{{{C}}}[{RI}]))", unit="ops", w=6),
        stat("Abort ratio", "Aborted / completed transactions. Red above 10 %: producers fail often — look at "
             "timeout aborts and fencings below.",
             f"sum(rate(txnwatch_transaction_aborts_total{{{C}}}[{RI}])) / clamp_min(sum(rate(txnwatch_transaction_commits_total{{{C}}}[{RI}])) + sum(rate(txnwatch_transaction_aborts_total{{{C}}}[{RI}])), 1e-9)",
             unit="percentunit", thr=thresholds((None, "green"), (0.01, "yellow"), (0.1, "red")), w=6),
        ts("Transactional ids by state", "Transactional ids per coordinator state. Growth of Ongoing without "
           "commits means producers do not finish; PrepareCommit/PrepareAbort should be near 0.",
           target(f"sum by (state) (txnwatch_transactions{{{C}}})", "{{state}}"), stack=True),
        bargauge("Open transactions by age", "How many open transactions are older than each threshold. "
                 "Anything older than 15 min is past transaction.max.timeout.ms: red, investigate in the table below.",
                 target(f'sum by (older_than_seconds) (txnwatch_open_transactions_older_than{{{C}}})',
                        "> {{older_than_seconds}} s", instant=True),
                 thr=thresholds((None, "green"), (1, "yellow")),
                 overrides=[override("byRegexp", "> (900|3600) s", "thresholds", OK_RED.build())]),
        ts("Oldest transaction by state", "Age of the oldest transaction in each open state. Red above 15 min (transaction.max.timeout.ms); Ongoing above the "
           "producer's transaction.timeout.ms (60 s default) should be aborted by the coordinator.",
           target(f"max by (cluster, state) (txnwatch_transaction_oldest_age_seconds{{{C}}})", "{{cluster}} {{state}}"),
           unit="s", thr=thresholds((None, "green"), (60, "yellow"), (900, "red"))),
        ts("Outcomes", "Commits, aborts, coordinator timeout aborts per second. Timeout aborts mean producers did "
           "not finish within transaction.timeout.ms: check the application or raise the timeout.",
           target(f"sum by (cluster) (rate(txnwatch_transaction_commits_total{{{C}}}[{RI}]))", "{{cluster}} commits"),
           target(f"sum by (cluster) (rate(txnwatch_transaction_aborts_total{{{C}}}[{RI}]))", "{{cluster}} aborts"),
           target(f"sum by (cluster) (rate(txnwatch_transaction_timeout_aborts_total{{{C}}}[{RI}]))",
                  "{{cluster}} timeout aborts"), unit="ops"),
        table("Oldest open transactions (top 20)", "The oldest open transactions; red above 15 min. A row older than its timeout "
              "column is one the coordinator should have aborted: `kafka-transactions.sh describe "
              "--transactional-id <id>`; restart or fence that producer.",
              f"topk(20, txnwatch_transaction_age_seconds{{{C}}})", unit="s", value="Open for",
              thr=thresholds((None, "green"), (60, "yellow"), (900, "red"))),
        table("Transaction timeouts of those ids", "transaction.timeout.ms of the same producers. Very long "
              "timeouts pin the LSO that long whenever a producer dies.",
              f"txnwatch_transaction_timeout_seconds{{{C}}}", unit="s", h=6, value="transaction.timeout.ms"),
        row("Frameworks (Kafka Streams, Flink)"),
        stat("Lingering Flink transactions", "Ongoing Flink sink transactions Flink will never finish (a later "
             "checkpoint of the same sink subtask committed, or the job is gone). Red: FlinkLingeringTransaction "
             "runbook; GET /api/v1/lingering hands out the abort by transactional id.",
             f"sum(txnwatch_flink_lingering_transactions{{{C}}}) or vector(0)", thr=OK_RED, w=6,
             runbook="flink_lingering_transaction"),
        table("Lingering Flink transactions (oldest 50)", "Each lingering transaction by sink (prefix), subtask and "
              "checkpoint, always red: it pins the LSO of its partitions until its coordinator's timeout. End it with "
              "`txnwatch abort --transactional-id <id> --execute` (Kafka 4.1+).",
              f"txnwatch_flink_lingering_transaction_age_seconds{{{C}}}", unit="s", thr=OK_RED, w=18,
              value="Open for", runbook="flink_lingering_transaction"),
        ts("Open transactions by application (top 10)", "Open transactions per Kafka Streams application or Flink "
           "sink, as their transactional ids name them: the 10 with the most over the range (the 50 applications "
           "with the most open transactions per cluster have series).",
           target(stable_top(10, "txnwatch_framework_open_transactions", C, on="cluster, framework, application"),
                  "{{cluster}} {{framework}} {{application}}"), w=24),
        row("Transactional canary (clusters with canary.enabled)"),
        stat("Canary commits", "1: the canary's latest round committed a transaction on every partition of its "
             "topic and a read_committed reader saw each. Red: transactions cannot commit "
             "(KafkaTransactionsCannotCommit runbook).", f"min(txnwatch_canary_up{{{C}}})",
             thr=thresholds((None, "red"), (1, "green")), w=6, runbook="transactions_cannot_commit"),
        stat("Canary coordinator", "Broker coordinating the canary's transactional id; -1: none found.",
             f"max(txnwatch_canary_coordinator_broker{{{C}}})", w=6),
        ts("Canary failures by stage", "Canary transactions that failed, by stage and KIP-1050 error class. "
           "coordinator/init/begin/end_txn point at the id's coordinator; produce/visibility at the partition leader.",
           target(f"sum by (cluster, stage, error_class) (rate(txnwatch_canary_failures_total{{{C}}}[{RI}]))",
                  "{{cluster}} {{stage}} {{error_class}}"), unit="ops", w=12),
        ts("Canary commit latency p99", "Begin to the commit acknowledged, by partition leader.",
           target(f"histogram_quantile(0.99, sum by (cluster, leader, le) "
                  f"(rate(txnwatch_canary_commit_latency_seconds_bucket{{{C}}}[{RI}])))", "{{cluster}} leader {{leader}}"),
           unit="s"),
        ts("Canary visibility latency p99", "The commit acknowledged to a read_committed reader being handed the "
           "record (the LSO passed it), by partition leader.",
           target(f"histogram_quantile(0.99, sum by (cluster, leader, le) "
                  f"(rate(txnwatch_canary_visibility_latency_seconds_bucket{{{C}}}[{RI}])))",
                  "{{cluster}} leader {{leader}}"), unit="s"),
    ])


def partitions() -> Dashboard:
    return dashboard("txnwatch-partitions", "txnwatch / Partitions & LSO",
                     "High watermark vs last stable offset: what read_committed consumers cannot see, and why.", topic=True, panels=[
        stat("Stalled partitions", "Partitions with an active LSO stall. Red: table below names the blocking "
             "producer; KafkaLSOStalled runbook.", f"sum(txnwatch_partition_lso_stalled{{{CT}}}) or vector(0)",
             thr=OK_RED, w=6, runbook="lso_stall"),
        stat("Records invisible to read_committed", "Sum of HWM − LSO over all partitions. Normal: small and "
             "moving. Large and growing: an open transaction pins the LSO.",
             f"sum(txnwatch_partition_lso_gap{{{CT}}})", w=6, thr=thresholds((None, "green"), (10000, "yellow"))),
        stat("Hanging transactions", "Red: abort them (KafkaHangingTransaction runbook).",
             f"sum(txnwatch_hanging_transactions{{{C}}}) or vector(0)", thr=OK_RED, w=6, runbook="hanging_transaction"),
        stat("LSO stall episodes (range)", "Stall episodes that started in the selected time range.",
             f"sum(increase(txnwatch_lso_stall_episodes_total{{{C}}}[$__range]))", w=6),
        heatmap("HWM − LSO per partition (top 30 of the range)", "Each row is a partition, colour = "
                "records beyond the LSO. The 30 rows are the partitions with the largest gap over the whole range, "
                "so rows do not jump. A row that stays hot is a partition whose LSO is pinned: see the stall table.",
                target(stable_top(30, "txnwatch_partition_lso_gap", CT), "{{cluster}} {{topic}}-{{partition}}"),
                w=24, h=10, scheme="Oranges", y_axis=HeatmapYAxis().axis_placement(AxisPlacement.LEFT),
                legend_and_tooltip=True),
        state_timeline("LSO stalls per partition", "Red while an LSO stall episode is active on the partition; only "
                       "partitions that stalled in the selected range are shown.",
                       f"txnwatch_partition_lso_stalled{{{CT}}} and on (cluster, topic, partition) "
                       f"(max_over_time(txnwatch_partition_lso_stalled{{{CT}}}[$__range] @ end()) > 0)",
                       "{{cluster}} {{topic}}-{{partition}}", {"0": ("ok", "green"), "1": ("stalled", "red")},
                       w=24, h=6, runbook="lso_stall"),
        table("Active LSO stalls", "Stalled partitions with the producer and transactional id holding the LSO (red after 5 min: KafkaLSOStalled runbook). "
              "Confirm with `kafka-transactions.sh describe-producers --topic T --partition P`; abort if hanging, "
              "otherwise restart/fence the producer.", f"txnwatch_lso_stall_duration_seconds{{{CT}}}", unit="s",
              thr=thresholds((None, "green"), (60, "yellow"), (300, "red")), w=12, value="Stalled for",
              runbook="lso_stall"),
        table("Hanging transactions", "Partitions holding a transaction the coordinator cannot finish (always red). Abort: "
              "`kafka-transactions.sh abort --topic T --partition P --start-offset O` (offset from "
              "/api/v1/hanging).", f"txnwatch_hanging_transaction_age_seconds{{{CT}}}", unit="s", thr=OK_RED, w=12,
              value="Since last write", runbook="hanging_transaction",
              overrides=[override("byName", COLUMNS["reason"], "mappings", REASON_MAPPINGS)]),
        ts("HWM − LSO by topic", "Records not yet visible to read_committed consumers, per topic.",
           target(f"sum by (cluster, topic) (txnwatch_partition_lso_gap{{{CT}}})", "{{cluster}} {{topic}}")),
        ts("HWM − LSO by topic: brokers vs txnwatch", "The brokers' own LastStableOffsetLag (from their JMX "
           "exporters, partition leaders only) beside txnwatch's polled HWM − LSO. The same quantity: the broker's "
           "is current to its scrape, txnwatch's to its poll. Empty broker line: no exporter configured, or it "
           "drops kafka.cluster:type=Partition,name=LastStableOffsetLag.",
           target(f"sum by (cluster, topic) (txnwatch_broker_partition_lso_lag{{{CT}}})", "{{cluster}} {{topic}} brokers"),
           target(f"sum by (cluster, topic) (txnwatch_partition_lso_gap{{{CT}}})", "{{cluster}} {{topic}} txnwatch")),
        ts("Open transactions per partition (top 10)", "Producers with an open transaction on a partition.",
           target(stable_top(10, "txnwatch_partition_open_transactions", CT), "{{cluster}} {{topic}}-{{partition}}")),
        ts("Produce rate vs LSO progress by topic", "Offsets per second added at the HWM and passed by the LSO. "
           "HWM moving while the LSO is flat is an LSO stall.",
           target(f"sum by (cluster, topic) (rate(kafka_topic_partition_current_offset{{{CT}}}[{RI}]))",
                  "{{cluster}} {{topic}} HWM"),
           target(f"sum by (cluster, topic) (rate(txnwatch_partition_last_stable_offset{{{CT}}}[{RI}]))",
                  "{{cluster}} {{topic}} LSO"), unit="short"),
        ts("Retained records by topic", "HWM − earliest offset: records in the log. A pinned LSO also prevents "
           "compaction/cleaning past it.",
           target(f"sum by (cluster, topic) (kafka_topic_partition_current_offset{{{CT}}} - kafka_topic_partition_oldest_offset{{{CT}}})",
                  "{{cluster}} {{topic}}")),
    ])


def consumer_lag() -> Dashboard:
    return dashboard("txnwatch-consumer-lag", "txnwatch / Consumer lag",
                     "Lag of consumer groups against the LSO (what read_committed consumers can read) and "
                     "against the high watermark (what kafka_exporter/Burrow report).", topic=True, group=True, panels=[
        ts("Lag vs LSO by group", "What a read_committed group really has left to read. Growing: the consumers "
           "are too slow. Flat while lag vs HWM grows: the LSO is stalled, not the consumer — see Partitions & LSO.",
           target(f"sum by (cluster, consumergroup) (txnwatch_consumergroup_topic_lag_lso{{{CG}}})",
                  "{{cluster}} {{consumergroup}}")),
        ts("Lag vs HWM by group", "kafka_exporter's lag (high watermark − committed offset). For read_committed "
           "groups it includes records they cannot read yet.",
           target(f"sum by (cluster, consumergroup) (kafka_consumergroup_lag_sum{{{CG}}})", "{{cluster}} {{consumergroup}}")),
        ts("Invisible part of the lag (HWM lag − LSO lag)", "Records behind the LSO that no read_committed "
           "consumer can reach. Large: an open or hanging transaction pins the LSO.",
           target(f"sum by (cluster, consumergroup) (kafka_consumergroup_lag_sum{{{CG}}}) - sum by (cluster, consumergroup) (txnwatch_consumergroup_topic_lag_lso{{{CG}}})",
                  "{{cluster}} {{consumergroup}}")),
        ts("Time lag (max over partitions)", "Age of the first record a group has not consumed (measured from its timestamp). Red above "
           "5 min: scale the consumers or fix the stall.",
           target(f"max by (cluster, consumergroup) (txnwatch_consumergroup_topic_lag_seconds{{{CG}}})",
                  "{{cluster}} {{consumergroup}}"), unit="s",
           thr=thresholds((None, "green"), (60, "yellow"), (300, "red"))),
        table("Lag per group and topic (vs LSO, top 50)", "Group topics with the most readable lag (per-topic "
              "series exist under both metrics.granularity settings; per partition: txnwatch_consumergroup_lag_lso).",
              f"topk(50, txnwatch_consumergroup_topic_lag_lso{{{CG}}})", value="Lag vs LSO (records)"),
        ts("Lag in records vs in offsets", "Records a read_committed group will really read before the LSO "
           "(commit/abort markers and aborted transactions' records left out) beside the offset lag vs the LSO. "
           "With one-record transactions the offsets are about twice the records. The record line is absent for "
           "a topic until every partition's count has reached the LSO (bounded reads, docs/metrics.md).",
           target(f"sum by (cluster, consumergroup) (txnwatch_consumergroup_topic_lag_records{{{CG}}})",
                  "{{cluster}} {{consumergroup}} records"),
           target(f"sum by (cluster, consumergroup) (txnwatch_consumergroup_topic_lag_lso{{{CG}}})",
                  "{{cluster}} {{consumergroup}} offsets")),
        ts("Committed offset progress by group", "Offsets committed per second. 0 while lag grows: the group is "
           "stuck or down.",
           target(f"sum by (cluster, consumergroup) (rate(kafka_consumergroup_current_offset_sum{{{CG}}}[{RI}]))",
                  "{{cluster}} {{consumergroup}}")),
    ])


def verification() -> Dashboard:
    q = ("histogram_quantile({q}, sum by (cluster, le) "
         "(rate(txnwatch_coordinator_listing_delay_seconds_bucket{{{c}}}[{ri}])))")
    return dashboard("txnwatch-verification", "txnwatch / Verification",
                     "KIP-890 verification as the brokers report it (their JMX exporters), beside what txnwatch "
                     "polls from outside: how long until a coordinator lists a partition, and how often it never "
                     "does.", [
        ts("Brokers' VerificationTimeMs", "The brokers' own kafka.server:type=AddPartitionsToTxnManager,"
           "name=VerificationTimeMs percentiles, per broker (recent-biased reservoir). Needs broker_metrics_urls "
           "or broker_metrics_url_template on the cluster; empty otherwise.",
           target(f'txnwatch_broker_verification_time_seconds{{{C},quantile="0.5"}}', "{{cluster}} {{broker}} p50"),
           target(f'txnwatch_broker_verification_time_seconds{{{C},quantile="0.99"}}', "{{cluster}} {{broker}} p99"),
           target(f"txnwatch_broker_verification_time_max_seconds{{{C}}}", "{{cluster}} {{broker}} max"), unit="s"),
        ts("Brokers' VerificationFailureRate", "Transactional writes the brokers refused because the coordinator "
           "did not know the transaction or partition (their own VerificationFailureRate), as a share of their "
           "verifications. A poller cannot see these: the write never reaches the partition. Expect a few around "
           "producer fencing; red above 1 %.",
           target(f"sum by (cluster) (rate(txnwatch_broker_verification_failures_total{{{C}}}[{RI}])) / clamp_min("
                  f"sum by (cluster) (rate(txnwatch_broker_verifications_total{{{C}}}[{RI}])), 1e-9)", "{{cluster}}"),
           unit="percentunit", thr=thresholds((None, "green"), (0.01, "red"))),
        stat("Broker exporters answering", "Brokers whose JMX exporter answered the latest poll with the "
             "verification MBeans, of those configured.",
             f"sum by (cluster) (txnwatch_broker_metrics_up{{{C}}})", w=8),
        stat("Broker verifications (range)", "Verifications the brokers performed in the selected range.",
             f"sum(increase(txnwatch_broker_verifications_total{{{C}}}[$__range])) or vector(0)", w=8),
        stat("Broker verification failures (range)", "Writes the brokers refused in the selected range.",
             f"sum(increase(txnwatch_broker_verification_failures_total{{{C}}}[$__range])) or vector(0)", w=8),
        ts("Late transactions (brokers) vs hanging (txnwatch)", "The brokers' ReplicaManager "
           "PartitionsWithLateTransactionsCount (open longer than transaction.max.timeout.ms, the broker's only "
           "threshold) beside txnwatch's hanging transactions (Kafka's find-hanging rule at the configured "
           "threshold, checked against the coordinator). Late but not hanging: a long transaction the coordinator "
           "still tracks. Empty broker line: the exporter does not export the MBean (txnwatch_broker_signal_up).",
           target(f"sum by (cluster) (txnwatch_broker_partitions_with_late_transactions{{{C}}})",
                  "{{cluster}} late (brokers)"),
           target(f"sum by (cluster) (txnwatch_hanging_transactions{{{C}}})", "{{cluster}} hanging (txnwatch)")),
        ts("Transaction marker queues (brokers)", "The coordinators' TransactionMarkerChannelManager queues: "
           "markers waiting for a partition leader to be known (UnknownDestinationQueueSize) and completed marker "
           "writes waiting to be logged again (LogAppendRetryQueueSize). Non-zero for long: transactions stay in "
           "PrepareCommit/PrepareAbort (txnwatch_txnlog_stuck_prepare).",
           target(f"txnwatch_broker_txn_marker_unknown_destination_queue{{{C}}}", "{{cluster}} {{broker}} unknown leader"),
           target(f"txnwatch_broker_txn_marker_log_append_retry_queue{{{C}}}", "{{cluster}} {{broker}} log append retry")),
        ts("Transaction coordinator load time (brokers)", "How long the broker took to load a __transaction_state "
           "partition after becoming its coordinator (partition-load-time-max/-avg); meanwhile its transactional "
           "ids answer COORDINATOR_LOAD_IN_PROGRESS.",
           target(f"txnwatch_broker_txn_coordinator_load_time_max_seconds{{{C}}}", "{{cluster}} {{broker}} max"),
           target(f"txnwatch_broker_txn_coordinator_load_time_avg_seconds{{{C}}}", "{{cluster}} {{broker}} avg"),
           unit="s"),
        stat("Broker transaction signals reported", "Signals (late transactions, LSO lag, marker queues, load "
             "time) the brokers' exporters reported in the latest poll, of those they could.",
             f"sum by (cluster) (txnwatch_broker_signal_up{{{C}}})", w=12),
        ts("Coordinator listing delay (polled by txnwatch)", "From a partition first showing a producer's open "
           "transaction until its coordinator lists the partition, as polling sees it (resolution: the poll "
           "interval). Not KIP-890's VerificationTimeMs. Red p99 above 30 s: coordinators are slow "
           "(KafkaTransactionVerificationSlow runbook).",
           target(q.format(q=0.5, c=C, ri=RI), "{{cluster}} p50"),
           target(q.format(q=0.95, c=C, ri=RI), "{{cluster}} p95"),
           target(q.format(q=0.99, c=C, ri=RI), "{{cluster}} p99"), unit="s",
           thr=thresholds((None, "green"), (30, "red"))),
        ts("Coordinator listing misses (polled by txnwatch)", "Share of checks where a partition holds an open "
           "transaction its coordinator does not list after the grace period: how hanging transactions start. "
           "Red above 1 %: check transaction.partition.verification.enable and client versions.",
           target(f"sum by (cluster) (rate(txnwatch_coordinator_listing_misses_total{{{C}}}[{RI}])) / clamp_min("
                  f"sum by (cluster) (rate(txnwatch_coordinator_listing_checks_total{{{C}}}[{RI}])), 1e-9)",
                  "{{cluster}}"), unit="percentunit", thr=thresholds((None, "green"), (0.01, "red")),
           runbook="verification_failure_rate"),
        heatmap("Coordinator listing delay distribution", "Histogram buckets over time; a band moving up "
                "means coordinators are getting slower.",
                target(f"sum by (le) (increase(txnwatch_coordinator_listing_delay_seconds_bucket{{{C}}}[{RI}]))",
                       "{{le}}", fmt="heatmap"), w=12, scheme="Blues", y_axis=HeatmapYAxis().unit("s")),
        ts("Listing checks and misses", "Checks per second and misses per second.",
           target(f"sum by (cluster) (rate(txnwatch_coordinator_listing_checks_total{{{C}}}[{RI}]))",
                  "{{cluster}} checks"),
           target(f"sum by (cluster) (rate(txnwatch_coordinator_listing_misses_total{{{C}}}[{RI}]))",
                  "{{cluster}} misses"),
           unit="ops"),
    ])


def coordinator() -> Dashboard:
    return dashboard("txnwatch-coordinator", "txnwatch / Coordinator history",
                     "Transaction coordinator behaviour over time: state transitions, epoch bumps, fencing.", [
        ts("State transitions", "Observed coordinator state transitions per second, from → to. Many "
           "Ongoing → PrepareAbort means producers abort a lot.",
           target(f"sum by (from_state, to_state) (rate(txnwatch_transaction_transitions_total{{{C}}}[{RI}]))",
                  "{{from_state}} → {{to_state}}"), unit="ops", w=24),
        ts("Epoch bumps and fencing", "Fencings are a new producer instance taking over a transactional id "
           "(zombie fencing, KIP-588); many of them mean producers restart or run twice (duplicate deployment).",
           target(f"sum by (cluster) (rate(txnwatch_producer_epoch_bumps_total{{{C}}}[{RI}]))", "{{cluster}} epoch bumps"),
           target(f"sum by (cluster) (rate(txnwatch_producer_fencings_total{{{C}}}[{RI}]))", "{{cluster}} fencings"),
           unit="ops"),
        ts("Coordinator timeout aborts", "Aborts by the coordinator after transaction.timeout.ms (epoch bumped, "
           "KIP-360). The late producer gets PRODUCER_FENCED/INVALID_PRODUCER_EPOCH: it must be recreated.",
           target(f"sum by (cluster) (increase(txnwatch_transaction_timeout_aborts_total{{{C}}}[{RI}]))", "{{cluster}}"),
           thr=thresholds((None, "green"), (1, "yellow"))),
        stat("Illegal transitions (range)", "Transitions the state machine does not allow (e.g. PrepareCommit → "
             "PrepareAbort). Red: a coordinator bug or a race worth a look in /api/v1/transactions/<cluster>/<id>.",
             f"sum(increase(txnwatch_illegal_transitions_total{{{C}}}[$__range])) or vector(0)", thr=OK_RED, w=8),
        stat("Fencings (range)", "Producers fenced in the selected range.",
             f"sum(increase(txnwatch_producer_fencings_total{{{C}}}[$__range])) or vector(0)", w=8),
        stat("Timeout aborts (range)", "Coordinator timeout aborts in the selected range.",
             f"sum(increase(txnwatch_transaction_timeout_aborts_total{{{C}}}[$__range])) or vector(0)", w=8),
    ])


DASHBOARDS = {"overview": overview, "transactions": transactions, "partitions-lso": partitions,
              "consumer-lag": consumer_lag, "verification": verification, "coordinator-history": coordinator}


def as_json(value: Any, indent: int) -> str:
    return json.dumps(value, cls=JSONEncoder, indent=indent, sort_keys=True, ensure_ascii=False) + "\n"


def render() -> dict[Path, str]:
    files: dict[Path, str] = {}
    panels: dict[str, dict[str, int]] = {}
    for name, build in DASHBOARDS.items():
        dash = build()
        text = as_json(dash, 2)
        files[OUT / f"txnwatch-{name}.json"] = text
        files[CHART_FILES / "dashboards" / f"txnwatch-{name}.json"] = text
        # The console links "the matching Grafana panel" (?viewPanel=<id>): panel ids by dashboard uid and title.
        panels[str(dash.uid)] = {str(p.title): int(p.id_val or 0) for p in dash.panels or [] if isinstance(p, dm.Panel)}
    files[CHART_FILES / "txnwatch-rules.yaml"] = RULES.read_text()
    files[CONSOLE_PANELS] = as_json(panels, 1)
    return files


def main(argv: list[str]) -> int:
    files = render()
    if "--check" in argv:
        stale = [str(p.relative_to(ROOT)) for p, text in files.items() if not p.exists() or p.read_text() != text]
        expected = {p.name for p in files if p.parent == OUT}
        extra = sorted(p.name for p in OUT.glob("*.json") if p.name not in expected)
        if stale or extra:
            print("out of date (run: python dashboards/build.py): " + ", ".join(stale + extra), file=sys.stderr)
            return 1
        return 0
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
