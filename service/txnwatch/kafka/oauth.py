"""SASL/OAUTHBEARER with an OIDC client-credentials grant: the token kafka-python sends to the broker.

What Kafka's own ``OAuthBearerLoginCallbackHandler`` does (KIP-768): POST
``grant_type=client_credentials`` (and ``scope``) to the identity provider's token
endpoint with the client id and secret as HTTP Basic credentials, send the returned
access token to the broker, and fetch a new one before the old one expires.  Kafka
refreshes at 80 % of the token's lifetime (``sasl.login.refresh.window.factor``); so
does this provider, so a reconnect or a KIP-368 re-authentication never presents an
expired token.  A failed refresh keeps the current token while it is still valid and
retries after a short back-off; only when no valid token is left does ``token()`` fail,
which kafka-python reports as a failed SASL login.

The client secret and the tokens never reach a log line or an exception message.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka.net.sasl.oauth import AbstractTokenProvider

log = logging.getLogger(__name__)

#: Share of a token's lifetime after which it is replaced (Kafka's sasl.login.refresh.window.factor).
REFRESH_FACTOR = 0.8
#: Wait after a failed refresh before the next attempt (while the current token is still valid).
RETRY_AFTER_S = 10.0
#: Lifetime assumed when the answer has neither ``expires_in`` nor a JWT ``exp`` claim.
DEFAULT_LIFETIME_S = 300.0

TokenRequest = Callable[["OAuthSettings"], Mapping[str, Any]]


class TokenError(Exception):
    """The token endpoint gave no usable token; the message names the endpoint, never a secret."""


@dataclass(frozen=True)
class OAuthSettings:
    """Where and how to obtain tokens.  Exactly one of the three secret sources is set."""

    token_endpoint_url: str
    client_id: str
    client_secret: str | None = field(default=None, repr=False)
    client_secret_file: str | None = None
    client_secret_env: str | None = None
    scope: str | None = None
    #: CA bundle for the token endpoint's TLS certificate (None: the system's trust store).
    ca_file: str | None = None
    #: SASL extensions sent with the token (Confluent Cloud: logicalCluster, identityPoolId).
    extensions: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float = 10.0

    def secret(self) -> str:
        """Read at every token request, so a rotated Kubernetes secret file is picked up without a restart."""
        if self.client_secret is not None:
            return self.client_secret
        if self.client_secret_file is not None:
            try:
                return Path(self.client_secret_file).read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise TokenError(f"cannot read the OAuth client secret file {self.client_secret_file}: "
                                 f"{exc.strerror or exc}") from None
        if self.client_secret_env is not None:
            value = os.environ.get(self.client_secret_env)
            if not value:
                raise TokenError(f"environment variable {self.client_secret_env} (OAuth client secret) is not set")
            return value
        raise TokenError("no OAuth client secret configured")


def request_token(settings: OAuthSettings) -> Mapping[str, Any]:
    """One client-credentials grant over HTTPS (RFC 6749 section 4.4), client authenticated with HTTP Basic."""
    import httpx

    form = {"grant_type": "client_credentials"}
    if settings.scope:
        form["scope"] = settings.scope
    verify: Any = ssl.create_default_context(cafile=settings.ca_file) if settings.ca_file else True
    try:
        response = httpx.post(settings.token_endpoint_url, data=form, auth=(settings.client_id, settings.secret()),
                              headers={"Accept": "application/json"}, timeout=settings.timeout_s, verify=verify)
    except httpx.HTTPError as exc:
        raise TokenError(f"token endpoint {settings.token_endpoint_url} unreachable: {type(exc).__name__}: {exc}") \
            from None
    if response.status_code != 200:
        # RFC 6749 section 5.2: the error code and description say what is wrong, and carry no secret.
        detail = ""
        try:
            body = response.json()
            detail = f": {body.get('error', '')} {body.get('error_description', '')}".rstrip()
        except ValueError:
            pass
        raise TokenError(f"token endpoint {settings.token_endpoint_url} answered HTTP {response.status_code}{detail}")
    try:
        answer = response.json()
    except ValueError:
        raise TokenError(f"token endpoint {settings.token_endpoint_url} answered with no JSON") from None
    if not isinstance(answer, dict):
        raise TokenError(f"token endpoint {settings.token_endpoint_url} answered with no JSON object")
    return answer


def _jwt_expiry_s(token: str) -> float | None:
    """The ``exp`` claim of a JWT, read without verifying it: only to time the refresh, the broker verifies."""
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        return float(claims["exp"])
    except (IndexError, ValueError, KeyError, TypeError):
        return None


@dataclass(frozen=True)
class _Token:
    value: str = field(repr=False)
    obtained_s: float
    expires_s: float

    @property
    def refresh_s(self) -> float:
        return self.obtained_s + (self.expires_s - self.obtained_s) * REFRESH_FACTOR


class OidcTokenProvider(AbstractTokenProvider):  # type: ignore[misc]  # kafka-python is untyped
    """kafka-python's OAUTHBEARER token provider, one per cluster, shared by its connections (thread-safe)."""

    def __init__(self, settings: OAuthSettings, *, clock: Callable[[], float] = time.time,
                 request: TokenRequest = request_token) -> None:
        super().__init__()
        self._settings, self._clock, self._request = settings, clock, request
        self._lock = threading.Lock()
        self._token: _Token | None = None
        self._retry_at_s = 0.0
        self.requests = 0  # token requests made, for tests and diagnostics
        #: Why the latest token request failed (kafka-python reports a failed login only as a timeout).
        self.last_error: str | None = None

    def token(self) -> str:
        with self._lock:
            now = self._clock()
            current = self._token
            if current is not None and now < current.refresh_s:
                return current.value
            if current is not None and now < current.expires_s and now < self._retry_at_s:
                return current.value  # refresh failed recently; the token still works
            try:
                self._token = self._fetch(now)
                self.last_error = None
            except TokenError as exc:
                self.last_error = str(exc)
                if current is not None and now < current.expires_s:
                    self._retry_at_s = now + RETRY_AFTER_S
                    log.warning("OAuth token refresh failed, keeping the current token until %.0f s before it "
                                "expires: %s", current.expires_s - now, exc)
                    return current.value
                raise
            return self._token.value

    def extensions(self) -> dict[str, str]:
        return dict(self._settings.extensions)

    def _fetch(self, now: float) -> _Token:
        self.requests += 1
        answer = self._request(self._settings)
        value = answer.get("access_token")
        if not isinstance(value, str) or not value:
            raise TokenError(f"token endpoint {self._settings.token_endpoint_url} answered without access_token")
        expires_in = answer.get("expires_in")
        if isinstance(expires_in, (int, float, str)) and str(expires_in).replace(".", "", 1).isdigit():
            expires = now + float(expires_in)
        else:
            expires = _jwt_expiry_s(value) or now + DEFAULT_LIFETIME_S
        if expires <= now:
            raise TokenError(f"token endpoint {self._settings.token_endpoint_url} handed out an expired token")
        log.info("obtained an OAuth token from %s, valid for %.0f s", self._settings.token_endpoint_url, expires - now)
        return _Token(value, now, expires)
