"""A fixed database for console pages rendered without a browser: the API tests' scenario at a frozen time."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from tests.api.factory import seed_scenario
from tests.fixtures.migrated import migrate
from txnwatch.runtime.wiring import build_runtime
from txnwatch.serve.app import create_app
from txnwatch.store.db import make_engine

FROZEN = datetime(2026, 11, 23, 3, 0, 0, tzinfo=UTC)  # 3 a.m., as on-call meets it
PAGES = {
    "now": "/console",
    "transaction": "/console/transactions/prod/orders-app-0_0",
    "partition": "/console/partitions/prod/orders/0?hours=2",
    "groups": "/console/groups",
}


@contextmanager
def console_client(directory: Path, **settings: Any) -> Iterator[TestClient]:
    """A TestClient on a seeded SQLite database whose console sees the clock stopped at FROZEN."""
    from tests.api.conftest import make_settings
    from txnwatch.serve.console import router

    url = f"sqlite:///{directory / 'console.db'}"
    migrate(url)
    engine = make_engine(url)
    try:
        with Session(engine) as session:
            seed_scenario(session, now=FROZEN)
    finally:
        engine.dispose()
    base = make_settings(url)
    runtime = build_runtime(base.model_copy(update=settings), collect=False)
    original = router.now
    router.now = lambda: FROZEN
    try:
        with TestClient(create_app(runtime, manage_lifecycle=False)) as client:
            yield client
    finally:
        router.now = original
        runtime.engine.dispose()


def rendered_hashes(client: TestClient) -> dict[str, str]:
    """Per page, a hash of everything its screenshot shows: the HTML the server renders (chart options
    included), the console's CSS and JS and the pinned library versions.  Pixels are not compared: fonts
    and anti-aliasing differ between machines, the content does not."""
    import hashlib

    from txnwatch.serve.console import assets

    static = assets.VENDOR.parent
    shared = b"".join((static / name).read_bytes() for name in ("console.css", "console.js"))
    shared += json.dumps(assets._manifest(), sort_keys=True).encode()
    hashes = {}
    for name, path in PAGES.items():
        response = client.get(path)
        response.raise_for_status()
        hashes[name] = hashlib.sha256(response.content + shared).hexdigest()
    return hashes
