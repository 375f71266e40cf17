"""`make test`'s two workers: which tests must share one (tests/fixtures/lanes.py: xdist_group).

A shared session service started on both workers costs its start twice (the 3-broker lab ~30 s of a core,
Spark ~25 s) and doubles the brokers' idle CPU for the rest of the run; a heavy module split over both starts its
module fixtures twice. Each row is one rule; a change to a rule changes its row."""

from __future__ import annotations

import pytest

from tests.fixtures.lanes import xdist_group

MODULE = "tests/e2e/test_x.py"

ROWS = [
    # 1. the 3-broker lab: every user on one worker, heavy or not, whatever else it uses
    (("lab_cluster",), False, "lab_cluster"),
    (("postgres_url", "lab_cluster", "kafka4_lab"), True, "lab_cluster"),
    # 2. Spark before the browser, the KDC and the Kafka 4 broker
    (("spark", "kafka4_lab"), True, "spark"),
    # 3. the browser (package-scoped in tests/console: one package, one worker)
    (("browser",), True, "browser"),
    # 4. the KDC before the Kafka 4 broker
    (("kdc", "kafka4_lab"), True, "kdc"),
    # 5. the Kafka 4 broker alone
    (("kafka4_lab", "tmp_path"), True, "kafka4_lab"),
    # 6. another heavy test (its own cluster of some version, PostgreSQL only): beside the rest of its module
    (("postgres_url", "tmp_path"), True, MODULE),
    # 7. a heavy test of tests/deploy/ (podman builds): with every other image build and the image test that polls
    # the 3-broker lab, whatever its module (checked below with its own module name)
    # 8. a light test: any worker
    (("tmp_path",), False, None),
]


@pytest.mark.parametrize(("fixtures", "heavy", "group"), ROWS)
def test_group(fixtures: tuple[str, ...], heavy: bool, group: str | None) -> None:
    assert xdist_group(fixtures, heavy, MODULE) == group


def test_image_builds_share_one_worker() -> None:
    assert xdist_group(("tmp_path",), True, "tests/deploy/test_image.py") == "lab_cluster"
    assert xdist_group(("lab_cluster", "tmp_path"), True, "tests/deploy/test_image.py") == "lab_cluster"
    assert xdist_group(("tmp_path",), True, "tests/deploy/test_release.py") == "lab_cluster"
    assert xdist_group(("tmp_path",), False, "tests/deploy/test_chart.py") is None
