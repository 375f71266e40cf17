"""The brokers' own KIP-890 verification figures, read from their Prometheus JMX exporters.

A poller cannot count what a broker refused: a transactional write that fails
verification never reaches the partition, so txnwatch's own partition-side
figures (``txnwatch_coordinator_listing_*``) cannot be VerificationFailureRate.
The brokers count it themselves in ``kafka.server:type=AddPartitionsToTxnManager``
(``name=VerificationTimeMs``, a histogram; ``name=VerificationFailureRate``, a
meter), and most operators already expose those MBeans with the Prometheus JMX
exporter agent.  This module scrapes one exporter URL per broker (bounded
timeouts, one thread per URL, errors as data) and picks the two MBeans out of
whatever naming the exporter's rules produce:

* the common Kafka rules (lower case, ``kafka_server_addpartitionstotxnmanager_verificationtimems``
  with a ``quantile`` label and ``_count``/``_mean``/``_max`` suffixes, a counter possibly
  suffixed ``_total`` by the exporter), and
* the exporter's default naming without rules
  (``kafka_server_AddPartitionsToTxnManager_99thPercentile{name="VerificationTimeMs"}``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor

from prometheus_client.parser import text_string_to_metric_families

from txnwatch.core import threadnames
from txnwatch.core.model import BrokerInfo, BrokerVerification
from txnwatch.kafka.broker_signals import parse_signals

_MANAGER = "addpartitionstotxnmanager"
_TIME, _FAILURE = "verificationtimems", "verificationfailurerate"
_PERCENTILE = re.compile(r"(\d+)thpercentile$")
#: A scrape body larger than this is not an exporter's answer we can use (and must not exhaust memory).
MAX_BODY_BYTES = 8 << 20


def expand_urls(template: str | None, explicit: Mapping[str, str],
                brokers: Iterable[BrokerInfo]) -> dict[str, str]:
    """Broker label -> exporter URL: the explicit ones, plus the template filled in per broker
    (``{node_id}``, ``{host}``) for brokers not listed explicitly."""
    urls = dict(explicit)
    if template:
        for broker in brokers:
            urls.setdefault(str(broker.node_id), template.format(node_id=broker.node_id, host=broker.host))
    return urls


def parse_exporter_text(broker: str, url: str, text: str) -> BrokerVerification:
    """The two MBeans' figures from an exporter's text exposition, an error when neither is in it; the other
    transaction signals (kafka.broker_signals) either way."""
    found: dict[str, float] = {}
    quantiles: dict[float, float] = {}
    try:
        samples = [s for family in text_string_to_metric_families(text) for s in family.samples]
    except (ValueError, TypeError, IndexError) as exc:
        return BrokerVerification(broker, url, error=f"not Prometheus text exposition: {exc}")
    for sample in samples:
        labels = {k.lower(): v for k, v in sample.labels.items()}
        name = sample.name.lower()
        full = f"{name}_{labels.get('name', '').lower()}"
        if _MANAGER not in full or name.endswith("_created"):
            continue
        mbean = _TIME if _TIME in full else _FAILURE if _FAILURE in full else None
        if mbean is None:
            continue
        attribute = _attribute(name, labels, mbean)
        if isinstance(attribute, float):
            if mbean == _TIME:
                quantiles[attribute] = float(sample.value)
        elif attribute is not None:
            found[f"{mbean}:{attribute}"] = float(sample.value)
    signals = parse_signals((s.name, s.labels, float(s.value)) for s in samples)
    if not found and not quantiles:
        return BrokerVerification(broker, url, signals=signals, error="no AddPartitionsToTxnManager VerificationTimeMs / "
                                                     "VerificationFailureRate in the exporter's output (Kafka < 3.6, "
                                                     "or the exporter's rules or includeObjectNames drop them)")
    count, failures = found.get(f"{_TIME}:count"), found.get(f"{_FAILURE}:count")
    return BrokerVerification(
        broker, url,
        verifications=int(count) if count is not None else None,
        time_ms_mean=found.get(f"{_TIME}:mean"), time_ms_max=found.get(f"{_TIME}:max"),
        time_ms_quantiles=tuple(sorted(quantiles.items())),
        failures=int(failures) if failures is not None else None,
        failures_per_second_1m=found.get(f"{_FAILURE}:oneminuterate"), signals=signals)


def _attribute(name: str, labels: Mapping[str, str], mbean: str) -> str | float | None:
    """The Yammer attribute a sample carries: "count", "mean", "max", "oneminuterate", a quantile (float), or
    None for the ones not used (min, stddev, the other rates)."""
    if "quantile" in labels:
        try:
            return float(labels["quantile"])
        except ValueError:
            return None
    # Rules naming: what follows the MBean's name; default naming: what follows the MBean type.
    anchor = mbean if mbean in name else _MANAGER
    suffix = name.split(anchor, 1)[1].strip("_")
    suffix = "count" if suffix in ("total", "count_total") else suffix
    percentile = _PERCENTILE.fullmatch(suffix)
    if percentile:
        return float(f"0.{percentile.group(1)}")
    return suffix if suffix in ("count", "mean", "max", "oneminuterate") else None


def scrape(urls: Mapping[str, str], timeout_ms: int) -> tuple[BrokerVerification, ...]:
    """GET every URL concurrently (each bounded by ``timeout_ms``); one BrokerVerification per URL, in
    label order, a failure being a BrokerVerification with ``error`` set.  Never raises."""
    if not urls:
        return ()
    items = sorted(urls.items())
    with ThreadPoolExecutor(max_workers=min(8, len(items)), thread_name_prefix="brokermetrics",
                            initializer=threadnames.name_current_from_python) as pool:
        return tuple(pool.map(lambda item: _scrape_one(item[0], item[1], timeout_ms), items))


def _scrape_one(broker: str, url: str, timeout_ms: int) -> BrokerVerification:
    import httpx  # only when exporter URLs are configured (~4.5 MB resident otherwise never loaded; issue 25)

    timeout = httpx.Timeout(timeout_ms / 1000)
    try:
        with httpx.Client(timeout=timeout, follow_redirects=False) as client, \
                client.stream("GET", url, headers={"Accept": "text/plain"}) as response:
            if response.status_code != 200:
                return BrokerVerification(broker, url, error=f"HTTP {response.status_code}")
            body = bytearray()
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > MAX_BODY_BYTES:
                    return BrokerVerification(broker, url, error=f"body over {MAX_BODY_BYTES} bytes")
    except httpx.HTTPError as exc:
        return BrokerVerification(broker, url, error=f"{type(exc).__name__}: {exc}" if str(exc)
                                  else type(exc).__name__)
    except ValueError as exc:  # a malformed URL in the configuration
        return BrokerVerification(broker, url, error=f"bad URL: {exc}")
    return parse_exporter_text(broker, url, body.decode("utf-8", errors="replace"))
