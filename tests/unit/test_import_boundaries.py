"""The rooms' import rules (STYLE.md), read from the source with ``ast`` so lazy imports inside functions count too.

* ``detect/`` and ``core/model.py`` are pure: no I/O library, no other room of txnwatch;
* ``api/`` never talks to Kafka (it reaches the admin abort through the runtime);
* ``kafka/`` never reaches into the store or the API;
* nothing outside ``kafka/`` imports kafka-python (the lab and its tests drive real clients and are exempt).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "service" / "txnwatch"

#: Libraries that do I/O (network, database, HTTP, files in bulk, processes): never in the pure core.
IO_LIBRARIES = ("kafka", "sqlalchemy", "alembic", "psycopg", "fastapi", "starlette", "uvicorn", "httpx", "requests",
                "prometheus_client", "apscheduler", "pyspark", "pyarrow", "socket", "ssl", "subprocess", "urllib",
                "http", "asyncio", "threading")
#: What the pure core may import from txnwatch itself.
PURE_ALLOWED = ("txnwatch.core.model", "txnwatch.detect", "txnwatch.core.vocabulary", "txnwatch.core.config")


def imports(path: Path, root: Path) -> Iterator[tuple[int, str]]:
    """Every module ``path`` imports, absolute, with its line (relative imports resolved against its package)."""
    package = ".".join(path.relative_to(root).with_suffix("").parts[:-1])
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            yield node.lineno, base


def modules(*relative: str) -> list[Path]:
    found: list[Path] = []
    for name in relative:
        target = PACKAGE / name
        found += sorted(target.rglob("*.py")) if target.is_dir() else [target]
    assert found, relative
    return found


def under(module: str, roots: tuple[str, ...]) -> bool:
    return any(module == root or module.startswith(root + ".") for root in roots)


def violations(paths: list[Path], forbidden: tuple[str, ...], allowed_internal: tuple[str, ...] | None = None,
               root: Path = PACKAGE.parent) -> list[str]:
    found = []
    for path in paths:
        for line, module in imports(path, root):
            internal = module.startswith("txnwatch.")
            if under(module, forbidden) or (internal and allowed_internal is not None
                                            and not under(module, allowed_internal)):
                found.append(f"{path.relative_to(root)}:{line} imports {module}")
    return found


@pytest.mark.parametrize(("paths", "forbidden", "allowed"), [
    pytest.param(modules("detect", "core/model.py"), IO_LIBRARIES, PURE_ALLOWED, id="detect-and-model-are-pure"),
    pytest.param(modules("serve/api"), ("kafka", "txnwatch.kafka"), None, id="api-never-talks-to-kafka"),
    pytest.param(modules("kafka"), ("txnwatch.store", "txnwatch.serve.api"), None, id="kafka-never-reaches-store-or-api"),
])
def test_room_boundaries(paths: list[Path], forbidden: tuple[str, ...], allowed: tuple[str, ...] | None) -> None:
    assert violations(paths, forbidden, allowed) == []


def test_only_the_kafka_layer_imports_kafka_python() -> None:
    rest = [p for p in PACKAGE.rglob("*.py") if not p.is_relative_to(PACKAGE / "kafka")
            and not p.is_relative_to(PACKAGE / "lab")]
    assert violations(rest, ("kafka",)) == []


def test_the_checker_sees_lazy_and_relative_imports(tmp_path: Path) -> None:
    """The rules above must be able to fail: a function-level import and a relative one are both caught."""
    probe = tmp_path / "txnwatch" / "detect" / "probe.py"
    probe.parent.mkdir(parents=True)
    probe.write_text("def f():\n    import sqlalchemy\n    from ..kafka import errors\n")
    found = violations([probe], IO_LIBRARIES, PURE_ALLOWED, root=tmp_path)
    assert found == ["txnwatch/detect/probe.py:2 imports sqlalchemy", "txnwatch/detect/probe.py:3 imports txnwatch.kafka"]
