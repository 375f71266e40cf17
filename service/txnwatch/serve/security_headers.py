"""The headers every API answer carries (serve/api/middleware.SecurityHeaders adds them; serve/front.py writes
them on the probes it answers itself): one list, without starlette, so the front never imports it."""

from __future__ import annotations

SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
