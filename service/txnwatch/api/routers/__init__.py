"""REST routers under /api/v1, one module per resource."""

from __future__ import annotations

from fastapi import FastAPI


def register(app: FastAPI) -> None:
    pass
