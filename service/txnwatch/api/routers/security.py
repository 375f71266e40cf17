"""Optional bearer token on the read endpoints.

The API shows transactional ids, topics and consumer groups, which some operators
treat as internal; ``api.read_token`` keeps them from anyone who can reach the port.
Probes (/healthz, /readyz) stay open so Kubernetes needs no secret.
"""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import HTTPException, Request, Security, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

bearer = HTTPBearer(auto_error=False, scheme_name="readToken",
                    description="Needed only when `api.read_token` is configured.")


async def require_reader(request: Request,
                         credentials: Annotated[HTTPAuthorizationCredentials | None, Security(bearer)]) -> None:
    # async and no RuntimeDep: runs on the event loop, no thread hop on every request.
    token = request.app.state.runtime.settings.api.read_token
    if token is None:
        return
    offered = credentials.credentials if credentials is not None else ""
    # Constant time, so the token cannot be guessed byte by byte from response times.
    if credentials is None or not hmac.compare_digest(offered.encode(), token.get_secret_value().encode()):
        raise HTTPException(status.HTTP_401_UNAUTHORIZED,
                            "read token missing or wrong: send 'Authorization: Bearer <api.read_token>'",
                            headers={"WWW-Authenticate": 'Bearer realm="txnwatch"'})
