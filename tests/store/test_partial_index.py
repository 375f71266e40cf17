"""store.partial_index: the partial indexes' DDL on both databases, without PostgreSQL's dialect on SQLite."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import cast

from sqlalchemy import Column, Index, Integer, MetaData, String, Table, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.schema import CreateIndex

from txnwatch.store import models as m
from txnwatch.store.partial_index import PartialIndex

EXPECTED = {
    "ix_transitions_anomaly":
        "CREATE INDEX ix_transitions_anomaly ON transitions (cluster_id, anomaly, at_ms) WHERE anomaly IS NOT NULL",
    "ix_transitions_retention": "CREATE INDEX ix_transitions_retention ON transitions (source, at_ms) "
                                "WHERE source = 'poll' OR anomaly IS NOT NULL",
}


def _ddl(index: Index, dialect: object) -> str:
    return str(CreateIndex(index).compile(dialect=dialect)).strip()  # type: ignore[arg-type]


def test_the_models_partial_indexes_render_the_same_ddl_on_both_databases() -> None:
    indexes = {i.name: i for i in cast(Table, m.TransactionTransition.__table__).indexes if i.name in EXPECTED}
    assert sorted(indexes) == sorted(EXPECTED)
    for name, index in indexes.items():
        assert isinstance(index, PartialIndex)
        assert _ddl(index, sqlite.dialect()) == EXPECTED[name]
        assert _ddl(index, postgresql.dialect()) == EXPECTED[name]


def test_a_partial_index_is_what_both_where_keywords_give() -> None:
    def table(name: str) -> Table:
        return Table(name, MetaData(), Column("a", Integer), Column("b", String(8)))

    plain = Index("ix_p", table("t").c.a, postgresql_where=text("b = 'x'"), sqlite_where=text("b = 'x'"))
    partial = PartialIndex("ix_p", table("t").c.a, where=text("b = 'x'"))
    # The flat view (what Alembic renders a migration from) names both keywords, as the plain index's does,
    # before anything has asked for PostgreSQL's options.
    assert sorted(partial.dialect_kwargs) == sorted(plain.dialect_kwargs) == ["postgresql_where", "sqlite_where"]
    assert str(partial.dialect_kwargs["postgresql_where"]) == "b = 'x'"
    for dialect in (sqlite.dialect(), postgresql.dialect()):
        assert _ddl(partial, dialect) == _ddl(plain, dialect) == "CREATE INDEX ix_p ON t (a) WHERE b = 'x'"


def test_the_models_do_not_load_postgresql_s_dialect() -> None:
    code = ("import json, sys; import txnwatch.store.models, txnwatch.store.recorder, txnwatch.store.txnlog\n"
            "print(json.dumps(sorted(n for n in sys.modules if n.startswith('sqlalchemy.dialects.postgresql'))))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []
