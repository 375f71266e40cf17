"""One Spark session for the whole test session: starting a JVM costs seconds."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fixtures.lanes import refuse_in_fast_lane


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    refuse_in_fast_lane("Spark", "spark")
    pytest.importorskip("pyspark")
    from txnwatch.pipeline.session import JavaMissing, build_session

    try:
        session = build_session("local[2]", "txnwatch-tests", {"spark.sql.shuffle.partitions": "2",
                                                               "spark.driver.memory": "1g"})
    except JavaMissing as exc:
        pytest.skip(str(exc))
    yield session
    session.stop()
