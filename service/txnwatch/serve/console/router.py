"""The built-in web console: server-rendered pages over the same database the REST API reads.

Now (per cluster: what hangs, what stalls, which alerts fire, with the abort command),
Transaction (one transactional id's states over time, epochs and fences) and Partition
(HWM vs LSO with the stall episodes and the blocking producer).  Same read token as the
API: a bearer header, or the cookie /console/login sets for browsers (until its Sign out).  Nothing is loaded
from outside the daemon: the chart library is served from static/vendor/.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Annotated, Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Depends, HTTPException, Query, Request, status
from fastapi import Path as PathParam
from fastapi.responses import HTMLResponse
from markupsafe import Markup
from sqlalchemy.orm import Session

from txnwatch.core import humanize
from txnwatch.core.epoch import from_ms
from txnwatch.core.hazards import cluster_hazards, epoch_headroom
from txnwatch.core.model import BrokerTxnSignals, TxnState
from txnwatch.core.redact import redact_optional
from txnwatch.core.views import ClusterView
from txnwatch.core.vocabulary import BY_RULE, HANGING_TRANSACTION, HAZARDS, LSO_STALL, REASONS, TxnEvent
from txnwatch.runtime.lifecycle import Runtime
from txnwatch.serve.api.convert import canary_view, framework_of, transition_view
from txnwatch.serve.api.deps import read_session, runtime_of
from txnwatch.serve.api.incidents import IncidentBuilder, runbook_href
from txnwatch.serve.api.params import INT32_MAX, TOPIC_PATTERN, now
from txnwatch.serve.api.routers.alerts import alert_view
from txnwatch.serve.api.security import require_reader
from txnwatch.serve.api.sessions import COOKIE
from txnwatch.serve.console import assets, cards, charts, group_lag, runbooks
from txnwatch.store import context, queries, txnlog_queries

HERE = Path(__file__).resolve().parent
LOGIN = "/console/login"
router = APIRouter(prefix="/console", include_in_schema=False)



class _Templates:
    """jinja2's Environment, built on the first console page (issue 25, idle RSS): a daemon nobody opens the
    console of never imports jinja2 nor compiles a template.  Filters and globals are gathered at import."""

    def __init__(self) -> None:
        self.filters: dict[str, Any] = {}
        self.globals: dict[str, Any] = {}
        self._environment: Any = None

    def get_template(self, name: str) -> Any:
        if self._environment is None:  # two first requests at once build two: harmless, the last one stays
            from jinja2 import Environment, FileSystemLoader, select_autoescape

            environment = Environment(loader=FileSystemLoader(HERE / "templates"),
                                      autoescape=select_autoescape(["html"]), trim_blocks=True, lstrip_blocks=True)
            environment.filters.update(self.filters)
            environment.globals.update(self.globals)
            self._environment = environment
        return self._environment.get_template(name)


_env = _Templates()
_env.filters.update(duration=humanize.duration, ts=humanize.timestamp, urlpart=lambda v: quote(str(v), safe=""))


def _chart(option: dict[str, Any]) -> Markup:
    """The option as an HTML attribute value (JSON, escaped), for static/console.js to hand to ECharts."""
    return Markup('data-chart="{}"').format(json.dumps(option, separators=(",", ":")))


_env.globals["chart"] = _chart
_env.globals["TxnEvent"] = TxnEvent  # templates name events as the code does


Reader = Annotated[None, Depends(require_reader)]
ReadSession = Annotated[Session, Depends(read_session)]


def page(request: Request, template: str, **data: Any) -> HTMLResponse:
    runtime = runtime_of(request)
    html = _env.get_template(template).render(
        assets_ok=assets.present(), grafana=runtime.settings.console.grafana_url, clusters=runtime.settings.clusters,
        runbook=lambda rule: runbook_href(runtime.settings, rule),
        signed_in=runtime.settings.api.read_token is not None and COOKIE in request.cookies,
        generated_at=now(), **data)
    return HTMLResponse(html)


HEADINGS = {404: "Not found", 422: "Not a valid address"}


def error_page(request: Request, status_code: int, detail: Any) -> HTMLResponse:
    """What a browser gets instead of the API's JSON when a console address names nothing: the reason in words
    and a way back (the Now page; the cluster's section when the address names a configured cluster)."""
    if isinstance(detail, list):  # a 422's validation errors: the first one, as a sentence
        first = detail[0] if detail else {}
        where = ".".join(str(p) for p in first.get("loc", ())[1:]) if isinstance(first, dict) else ""
        detail = f"{where}: {first.get('msg', 'invalid')}" if isinstance(first, dict) else str(first)
    parts = request.url.path.split("/")
    names = {c.name for c in runtime_of(request).settings.clusters}
    named = len(parts) > 3 and parts[2] in ("partitions", "transactions", "groups") and parts[3] in names
    cluster = parts[3] if named else None
    html = _env.get_template("error.html").render(
        assets_ok=False, title=HEADINGS.get(status_code, "Error"), heading=HEADINGS.get(status_code, "Error"),
        detail=str(detail), status=status_code, cluster=cluster, generated_at=now())
    return HTMLResponse(html, status_code=status_code)


PANELS: dict[str, dict[str, int]] = json.loads((HERE / "grafana_panels.json").read_text())


def grafana_link(base: str | None, uid: str, panel: str | None = None, **variables: Any) -> str | None:
    """A shipped dashboard (dashboards/build.py uids), opened on ``panel`` (by title) when it has one, with its
    variables set; None without a Grafana URL."""
    if not base:
        return None
    query = {f"var-{k}": v for k, v in variables.items() if v is not None}
    panel_id = PANELS.get(uid, {}).get(panel or "")
    if panel_id is not None:
        query["viewPanel"] = panel_id
    return f"{base.rstrip('/')}/d/{uid}?{urlencode(query)}"


_env.globals["grafana_link"] = grafana_link


@router.get("", response_class=HTMLResponse)
def now_page(request: Request, _: Reader, session: ReadSession) -> HTMLResponse:
    runtime = runtime_of(request)
    at = now()
    incidents = IncidentBuilder(session, runtime.settings, at, runtime.state)
    names = [c.name for c in runtime.settings.clusters]
    records = queries.cluster_records(session, names)
    hanging = incidents.hanging_all([(r, r.cluster_name) for r in queries.list_hanging(
        session, clusters=names, include_resolved=False, after=None, limit=200)])
    stalls = incidents.stall_all([(r, r.cluster_name) for r in queries.list_lso_stalls(
        session, clusters=names, since=at, after=None, limit=200)])
    alerts = [SimpleNamespace(**r._mapping, **alert_view(r)) for r in queries.list_alerts(
        session, clusters=names, with_unscoped=True, states=["firing", "pending"], after=None, limit=200)]
    incident_cards, other_alerts = cards.build(hanging, stalls, alerts)
    lingering: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for item in incidents.lingering_all(names):
        lingering[item["cluster"]].append(item)
    clusters = []
    for name in names:
        view = runtime.state.get(name)
        record = records.get(name)
        # This process's view when it polls the cluster; otherwise what the polling replica recorded.
        if view is not None and view.last_poll_at_ms is not None:
            up, error, last = view.up, redact_optional(view.last_error), from_ms(view.last_success_at_ms)
        else:
            up, error = bool(record and record.up), redact_optional(record.last_error if record else None)
            last = record.last_success_at if record else None
        gaps = view.history.gaps if view is not None else ()
        snapshot = view.snapshot if view is not None else None
        clusters.append(dict(
            name=name, up=up, last_success_at=last, last_error=error,
            history_gaps=[dict(partition=g.log_partition, first=g.first_offset, last=g.last_offset, records=g.records,
                               after=from_ms(g.after_ms), before=from_ms(g.before_ms))
                          for g in reversed(gaps)],
            cards=[card for card in incident_cards if card.cluster == name],
            alerts=[a for a in other_alerts if a.cluster_name == name], brokers=_broker_signals(view),
            hazards=[HAZARDS[h] for h in cluster_hazards(snapshot.broker_releases if snapshot else ())],
            headroom=epoch_headroom(snapshot.transactions.values()) if snapshot else (),
            lingering=lingering[name],
            canary=canary_view(view.canary) if view is not None and view.canary is not None else None))
    unscoped = [a for a in other_alerts if a.cluster_name is None]
    return page(request, "now.html", title="Now", now=at, cluster_views=clusters, unscoped_alerts=unscoped,
                 reasons=REASONS, rules=BY_RULE, hanging_runbook=runbook_href(runtime.settings, HANGING_TRANSACTION),
                 stall_runbook=runbook_href(runtime.settings, LSO_STALL))


def _broker_signals(view: ClusterView | None) -> list[dict[str, Any]]:
    """The brokers' own transaction signals from this process's latest poll (their JMX exporters), one row per
    broker whose exporter answered; None where the broker did not report the signal."""
    snapshot = view.snapshot if view is not None else None
    rows = []
    for b in snapshot.broker_verification if snapshot is not None else ():
        s = b.signals
        if b.error is not None and s == BrokerTxnSignals():
            continue
        worst = max(s.lso_lag, key=lambda t: t[2]) if s.lso_lag else None
        rows.append(dict(broker=b.broker, late=s.late_transaction_partitions,
                         lso_lag=None if worst is None else worst[2],
                         lso_lag_partition=None if worst is None or worst[2] == 0 else f"{worst[0]}-{worst[1]}",
                         unknown_destination=s.marker_unknown_destination_queue,
                         append_retry=s.marker_log_append_retry_queue,
                         load_max_ms=s.coordinator_load_ms_max))
    return rows


def _cluster_id(session: Session, runtime: Runtime, cluster: str) -> int:
    if cluster not in {c.name for c in runtime.settings.clusters}:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"unknown cluster {cluster!r}")
    cid = queries.cluster_ids(session, [cluster]).get(cluster)
    if cid is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"nothing recorded yet for cluster {cluster!r}")
    return cid


@router.get("/transactions/{cluster}/{transactional_id:path}", response_class=HTMLResponse)
def transaction_page(request: Request, _: Reader, session: ReadSession, cluster: str, transactional_id: str,
                     limit: Annotated[int, Query(ge=1, le=5000)] = 1000) -> HTMLResponse:
    runtime = runtime_of(request)
    cid = _cluster_id(session, runtime, cluster)
    # The same view of the id as the API's list and detail.
    row = queries.get_transaction(session, cid, transactional_id) if "\x00" not in transactional_id else None
    if row is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"transactional id {transactional_id!r} is unknown on "
                                                       f"cluster {cluster!r}")
    at = now()
    # The timeline the API serves: the coordinators' own log (exact) and polled transitions, newest first.
    newest_first = txnlog_queries.timeline(session, cid, cluster, transactional_id, limit,
                                           runtime.settings.retention.archive_dir)
    points = [charts.StatePoint(from_ms(t.at_ms), t.to_state, t.producer_id, t.producer_epoch, t.events)
              for t in reversed(newest_first)]
    # The log and a poll may both report one fence: count each new (producer id, epoch) once.
    fences = len({(p.producer_id, p.producer_epoch) for p in points if TxnEvent.FENCED in p.events})
    incidents = IncidentBuilder(session, runtime.settings, at, runtime.state)
    hanging = incidents.hanging_all([(e, cluster) for e in queries.open_hanging_of(session, cid, transactional_id)])
    # An Ongoing transaction its coordinator holds: the abort by id ends it everywhere (Kafka 4.1+).
    by_id = (incidents.abort_by_id_command(cluster, transactional_id)
             if row.txn.state == TxnState.ONGOING.value else None)
    return page(request, "transaction.html", title=f"Transaction {transactional_id}", now=at, cluster=cluster,
                 txn=row.txn, hanging=hanging, transitions=[transition_view(t) for t in newest_first],
                 truncated=len(newest_first) >= limit, option=charts.transaction_timeline(points, at),
                 fences=fences, abort_by_id_command=by_id, txn_framework=framework_of(transactional_id))


@router.get("/partitions/{cluster}/{topic}/{partition}", response_class=HTMLResponse)
def partition_page(request: Request, _: Reader, session: ReadSession, cluster: str,
                   topic: Annotated[str, PathParam(pattern=TOPIC_PATTERN)],
                   partition: Annotated[int, PathParam(ge=0, le=INT32_MAX)], hours: Annotated[float, Query(gt=0, le=24 * 14)] = 1) -> HTMLResponse:
    runtime = runtime_of(request)
    key = context.PartitionKey(_cluster_id(session, runtime, cluster), topic, partition)
    at = now()
    since = at - timedelta(hours=hours)
    samples = context.history(session, key, since)
    stall_rows, hanging_rows = context.episodes(session, key, since)
    if not samples and not stall_rows and not hanging_rows and key not in context.latest_samples(session, [key]):
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no offsets are recorded for partition {topic}-{partition} "
                                                       f"on cluster {cluster!r}: check the topic and partition")
    incidents = IncidentBuilder(session, runtime.settings, at, runtime.state)
    stalls = incidents.stall_all([(s, cluster) for s in stall_rows])
    hanging = incidents.hanging_all([(h, cluster) for h in hanging_rows])
    option = charts.partition_offsets(
        [charts.OffsetPoint(s.sampled_at, s.high_watermark, s.last_stable_offset) for s in samples],
        [charts.Episode(s["started_at"], s["ended_at"] or at, _blocker(s)) for s in stalls],
        [(h["first_write_at"] or h["first_seen_at"], h["txn_start_offset"], f"hanging: producer {h['producer_id']}")
         for h in hanging if h["resolved_at"] is None and h["txn_start_offset"] is not None],
        window=(since, at))
    latest = samples[-1] if samples else None
    # The open incident's one clock, built as the Now page builds its card (same findings, same alerts), so
    # the "since" printed here is the card's and /api/v1/alerts' moment, not the stall episode's own start.
    alerts = [SimpleNamespace(**r._mapping, **alert_view(r)) for r in queries.list_alerts(
        session, clusters=[cluster], with_unscoped=False, states=["firing", "pending"], after=None, limit=200)]
    open_cards, _elsewhere = cards.build([h for h in hanging if h["resolved_at"] is None],
                                        [s for s in stalls if s["ended_at"] is None], alerts)
    incident = open_cards[0] if open_cards else None
    return page(request, "partition.html", title=f"Partition {topic}-{partition}", now=at, cluster=cluster,
                 topic=topic, partition=partition, hours=hours, latest=latest, stalls=stalls, hanging=hanging,
                 option=option, incident=incident)


@router.get("/groups", response_class=HTMLResponse)
def groups_page(request: Request, _: Reader, session: ReadSession) -> HTMLResponse:
    runtime = runtime_of(request)
    rows = group_lag.groups(session, runtime.state, [c.name for c in runtime.settings.clusters])
    return page(request, "groups.html", title="Consumer groups", now=now(), groups=rows,
                 truncated=len(rows) >= group_lag.LIST_LIMIT)


@router.get("/groups/{cluster}/{group_id:path}", response_class=HTMLResponse)
def group_page(request: Request, _: Reader, session: ReadSession, cluster: str, group_id: str,
               hours: Annotated[float, Query(gt=0, le=24 * 14)] = 1) -> HTMLResponse:
    runtime = runtime_of(request)
    cid = _cluster_id(session, runtime, cluster)
    at = now()
    rows = group_lag.partitions(session, runtime.state, cid, cluster, group_id) if "\x00" not in group_id else []
    if not rows:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"consumer group {group_id!r} has no committed offsets "
                                                       f"recorded on cluster {cluster!r}")
    lso = [r.lag_lso for r in rows if r.lag_lso is not None]
    hwm = [r.lag_hwm for r in rows if r.lag_hwm is not None]
    since = at - timedelta(hours=hours)
    history = queries.group_lag_history(session, cid, group_id, since)
    option = charts.group_lag([(p.sampled_at, p.lag_lso, p.lag_hwm, p.lag_records) for p in history],
                              window=(since, at))
    return page(request, "group.html", title=f"Group {group_id}", now=at, cluster=cluster, group_id=group_id,
                 rows=rows, lag_lso=sum(lso) if lso else None, lag_hwm=sum(hwm) if hwm else None,
                 lag_records=group_lag.total(rows), hours=hours, option=option)


def _blocker(stall: dict[str, Any]) -> str:
    pid = stall["blocking_producer_id"]
    if pid is None:
        return "LSO stall"
    txn = stall["blocking_transactional_id"] or "no transactional id"
    return f"LSO stall: producer {pid} ({txn})"


@router.get("/runbooks", response_class=HTMLResponse)
def runbooks_page(request: Request, _: Reader) -> HTMLResponse:
    return page(request, "runbooks.html", title="Runbooks", sections=runbooks.sections())


def since_text(at: datetime | None, reference: datetime) -> str:
    return humanize.ago(at, reference)


_env.filters["ago"] = since_text
