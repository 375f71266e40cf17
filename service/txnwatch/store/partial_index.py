"""A partial index whose ``WHERE`` reaches PostgreSQL's DDL without importing PostgreSQL's dialect on SQLite.

``Index(..., postgresql_where=...)`` makes SQLAlchemy load ``sqlalchemy.dialects.postgresql`` when the model
class is defined, to check that the dialect accepts the keyword: ~2.3 MB resident in a daemon that only
ever talks to SQLite (issue 25, idle RSS).  :class:`PartialIndex` passes ``sqlite_where`` as before and adds
``where`` to the PostgreSQL options the first time anything asks for them: the PostgreSQL DDL compiler, a
migration comparison, or a reader of :attr:`dialect_kwargs` (which therefore loads the dialect).  The DDL on
both databases is what ``Index(..., postgresql_where=w, sqlite_where=w)`` renders.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Index, TextClause, util
from sqlalchemy.sql.base import _DialectArgDict, _DialectArgView


class PartialIndex(Index):
    """``Index(name, *expressions, postgresql_where=where, sqlite_where=where)``, PostgreSQL's part resolved on
    first use."""

    def __init__(self, name: str, *expressions: Any, where: TextClause, **kw: Any) -> None:
        self._where = where
        super().__init__(name, *expressions, sqlite_where=where, **kw)

    @util.memoized_property
    def dialect_options(self) -> util.PopulateDict[str, _DialectArgDict]:
        return util.PopulateDict(self._options_for)

    def _options_for(self, dialect_name: str) -> _DialectArgDict:
        options = self._kw_reg_for_dialect_cls(dialect_name)
        if dialect_name == "postgresql":
            options["where"] = self._where
        return options

    @property
    def dialect_kwargs(self) -> _DialectArgView:
        """Every option passed, ``postgresql_where`` included: the flat view lists only the dialects whose
        options were asked for, so this one asks for PostgreSQL's (it is read by migration tooling, not by
        the daemon)."""
        self.dialect_options["postgresql"]
        return super().dialect_kwargs
