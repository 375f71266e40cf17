"""The built-in web console and the offline API docs, mounted on the daemon's FastAPI app."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles
from starlette.types import Scope

STATIC = "/console/static"
LOGIN = "/console/login"


class _Static(StaticFiles):
    """Vendored libraries change only with their pinned version: let browsers keep them for a day."""

    async def get_response(self, path: str, scope: Scope):
        response = await super().get_response(path, scope)
        if response.status_code == 200:
            response.headers["Cache-Control"] = "public, max-age=86400"
        return response


def register_docs(app: FastAPI) -> None:
    """Swagger UI and ReDoc from the vendored npm packages: /docs works with no internet access.

    Create the app with ``docs_url=None, redoc_url=None`` so FastAPI's CDN-backed pages are not registered.
    """
    from txnwatch.serve.console import assets  # not at module level: `python -m txnwatch.serve.console.assets` runs it

    openapi_url = app.openapi_url or "/openapi.json"

    @app.get("/docs", include_in_schema=False)
    def swagger() -> HTMLResponse:
        if not assets.present():
            return _no_assets(openapi_url)
        return get_swagger_ui_html(openapi_url=openapi_url, title=f"{app.title} API",
                                   swagger_js_url=f"{STATIC}/vendor/swagger-ui-bundle.js",
                                   swagger_css_url=f"{STATIC}/vendor/swagger-ui.css",
                                   swagger_favicon_url=f"{STATIC}/vendor/favicon-32x32.png",
                                   swagger_ui_parameters={"validatorUrl": None})

    @app.get("/redoc", include_in_schema=False)
    def redoc() -> HTMLResponse:
        if not assets.present():
            return _no_assets(openapi_url)
        return get_redoc_html(openapi_url=openapi_url, title=f"{app.title} API",
                              redoc_js_url=f"{STATIC}/vendor/redoc.standalone.js",
                              redoc_favicon_url=f"{STATIC}/vendor/favicon-32x32.png", with_google_fonts=False)


def _no_assets(openapi_url: str) -> HTMLResponse:
    return HTMLResponse(f"<!doctype html><title>txnwatch API</title><p>The API documentation assets are not "
                        f"installed (run scripts/bootstrap.sh or python -m txnwatch.serve.console.assets). The "
                        f"OpenAPI document is at <a href='{openapi_url}'>{openapi_url}</a>.</p>")


def register(app: FastAPI, *, console_enabled: bool = True) -> None:
    """Static assets, offline /docs and /redoc, and (unless disabled) the console pages with / pointing there."""
    from pathlib import Path

    app.mount(STATIC, _Static(directory=Path(__file__).resolve().parent / "static", check_dir=False),
              name="console-static")
    register_docs(app)
    if not console_enabled:
        return
    from fastapi.exception_handlers import http_exception_handler, request_validation_exception_handler
    from fastapi.exceptions import RequestValidationError
    from starlette.exceptions import HTTPException
    from starlette.requests import Request
    from starlette.responses import Response

    from txnwatch.serve.console import signin
    from txnwatch.serve.console.router import error_page, router

    app.include_router(router)
    app.include_router(signin.router)

    def _for_a_browser(request: Request) -> bool:
        """A console address asked by a browser gets a page; the API and scripts keep the one JSON shape."""
        path = request.url.path
        return (path == "/console" or path.startswith("/console/")) and not path.startswith(STATIC + "/") \
            and "text/html" in request.headers.get("accept", "")

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        if exc.status_code in (404, 422) and _for_a_browser(request):
            return error_page(request, exc.status_code, exc.detail)
        return await http_exception_handler(request, exc)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> Response:
        if _for_a_browser(request):
            return error_page(request, 422, exc.errors())
        return await request_validation_exception_handler(request, exc)

    @app.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        return RedirectResponse("/console")
