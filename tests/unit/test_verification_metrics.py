"""/metrics: txnwatch's coordinator-listing figures under their new names (the old ones still served, equal), and
the brokers' own KIP-890 figures per broker."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from txnwatch.core.model import BrokerVerification, ClusterSnapshot
from txnwatch.core.views import LatestState
from txnwatch.metrics.poll_counters import PollMetrics
from txnwatch.metrics.registry import build_registry


def _registry():
    state = LatestState()
    figures = (BrokerVerification("1", "http://b1/metrics", verifications=1073, failures=9, time_ms_max=187.0,
                                  time_ms_mean=2.5, time_ms_quantiles=((0.5, 1.0), (0.99, 19.7)),
                                  failures_per_second_1m=0.02),
               BrokerVerification("2", "http://b2/metrics", error="ConnectError"))
    state.update("prod", snapshot=ClusterSnapshot(cluster="prod", taken_at_ms=1, duration_ms=1,
                                                  broker_verification=figures))
    state.update("dev")
    return build_registry(state, lambda: True)


def test_listing_figures_new_names_equal_the_deprecated_ones():
    r = _registry()
    sink = PollMetrics(r, ["prod", "dev"])
    snapshot = ClusterSnapshot(cluster="prod", taken_at_ms=1, duration_ms=1)
    for delays_ms in ([800, 2_000, None], [4_000, 2_400]):
        samples = [SimpleNamespace(verification_ms=ms) for ms in delays_ms]
        findings = SimpleNamespace(lso_stalls_opened=(), verification=SimpleNamespace(
            checks=len(delays_ms) + 2, failures=delays_ms.count(None), samples=samples))
        sink.on_poll("prod", snapshot, findings, None, 1)
    pairs = [("txnwatch_coordinator_listing_checks_total", "txnwatch_verification_checks_total", 9),
             ("txnwatch_coordinator_listing_misses_total", "txnwatch_verification_failures_total", 1),
             ("txnwatch_coordinator_listing_delay_seconds_count", "txnwatch_verification_time_seconds_count", 4),
             ("txnwatch_coordinator_listing_delay_seconds_sum", "txnwatch_verification_time_seconds_sum", 9.2)]
    for new, old, value in pairs:
        assert r.get_sample_value(new, {"cluster": "prod"}) == r.get_sample_value(old, {"cluster": "prod"})
        assert r.get_sample_value(new, {"cluster": "prod"}) == pytest.approx(value)
    bucket = {"cluster": "prod", "le": "2.5"}
    assert r.get_sample_value("txnwatch_coordinator_listing_delay_seconds_bucket", bucket) == 3
    assert r.get_sample_value("txnwatch_coordinator_listing_checks_total", {"cluster": "dev"}) == 0


def test_the_brokers_own_figures_per_broker():
    r = _registry()
    b1, b2 = {"cluster": "prod", "broker": "1"}, {"cluster": "prod", "broker": "2"}
    assert r.get_sample_value("txnwatch_broker_metrics_up", b1) == 1
    assert r.get_sample_value("txnwatch_broker_metrics_up", b2) == 0
    assert r.get_sample_value("txnwatch_broker_verifications_total", b1) == 1073
    assert r.get_sample_value("txnwatch_broker_verification_failures_total", b1) == 9
    assert r.get_sample_value("txnwatch_broker_verification_failures_per_second", b1) == 0.02
    assert r.get_sample_value("txnwatch_broker_verification_time_seconds", {**b1, "quantile": "0.99"}) == 0.0197
    assert r.get_sample_value("txnwatch_broker_verification_time_max_seconds", b1) == 0.187
    assert r.get_sample_value("txnwatch_broker_verification_time_mean_seconds", b1) == 0.0025
    # A broker whose exporter failed has no figures, not zeros.
    assert r.get_sample_value("txnwatch_broker_verifications_total", b2) is None
    assert r.get_sample_value("txnwatch_broker_metrics_up", {"cluster": "dev", "broker": "1"}) is None
