"""Shared pytest wiring: real PostgreSQL / SQLite stores and the real-Kafka lab."""

from __future__ import annotations

import os

import pytest
from hypothesis import settings as hypothesis_settings

from tests.fixtures.lanes import examples, group_for_workers, in_fast_lane, mark_heavy, refuse_in_fast_lane

pytest_plugins = [
    "tests.fixtures.databases",
    "txnwatch.lab.pytest_plugin",
]


def pytest_configure(config: pytest.Config) -> None:
    # pytest-xdist registers the marker group_for_workers adds; without the plugin (-p no:xdist) it is ours.
    config.addinivalue_line("markers", "xdist_group(name): the tests one xdist worker runs (--dist loadgroup)")
    if in_fast_lane():
        # Property tests without their own max_examples (Hypothesis's 100) get a third too, as examples() gives
        # those that set one; `make test` keeps Hypothesis's default profile.
        hypothesis_settings.register_profile("fast-lane", max_examples=examples(100))
        hypothesis_settings.load_profile("fast-lane")
        # Every lab cluster, the plugin's and those the end-to-end tests start themselves, goes through start_lab.
        from txnwatch.lab import cluster

        real_start_lab = cluster.start_lab

        def start_lab(*args: object, **kwargs: object) -> object:
            refuse_in_fast_lane("a Kafka lab cluster", "lab")
            return real_start_lab(*args, **kwargs)  # type: ignore[arg-type]  # the real signature, passed through

        cluster.start_lab = start_lab  # type: ignore[assignment]  # a refusing wrapper, in the fast lane only


@pytest.fixture(autouse=True)
def _process_secrets_restored() -> object:
    """Each test starts with the process-wide secrets (txnwatch.core.redact.register) it found: a notifier a
    test builds registers its key for the rest of the worker's life, and the next test's logs would be
    scrubbed of it, in whatever order xdist runs them."""
    from txnwatch.core import redact

    before = redact.registered()
    yield
    redact.restore(before)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # First: pytest-xdist's worker reads the xdist_group markers in its own pytest_collection_modifyitems (it
    # appends the group to each node id, which --dist loadgroup schedules by).
    mark_heavy(items)
    group_for_workers(items)


_LOST_GROUPS = pytest.StashKey[str]()


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """Under ``--dist loadgroup``, note when the groups did not reach the node ids xdist schedules by: every shared
    service (the 3-broker lab, Spark, the browser, the KDC) would start on every worker, and a module's fixtures
    once per worker, silently (pytest 9.2 with pytest-xdist 3.8: constraints.txt).  Each grouped test then fails
    saying so (an error raised here would only reach the controller as an INTERNALERROR without its text)."""
    config = session.config
    if not os.environ.get("PYTEST_XDIST_WORKER") or not config.getvalue("loadgroup"):
        return
    lost = [item.nodeid for item in session.items
            if item.get_closest_marker("xdist_group") is not None and "@" not in item.nodeid]
    if lost:
        config.stash[_LOST_GROUPS] = (
            f"pytest-xdist's --dist loadgroup did not take the xdist_group markers of {len(lost)} tests with pytest "
            f"{pytest.__version__}: install constraints.txt's versions (make test does)")


def pytest_runtest_setup(item: pytest.Item) -> None:
    lost = item.config.stash.get(_LOST_GROUPS, None)
    if lost is not None and item.get_closest_marker("xdist_group") is not None:
        pytest.fail(lost, pytrace=False)
