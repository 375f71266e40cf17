"""Connects kafka/ → detect/ → store/ and alerting/ for each configured cluster."""

from __future__ import annotations

from txnwatch.runtime import Runtime


def wire_collection(runtime: Runtime) -> None:
    pass
