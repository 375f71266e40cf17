"""A local OIDC issuer, and the settings that make the secure test broker accept its tokens (SASL/OAUTHBEARER).

The issuer is a small HTTP server on 127.0.0.1: ``POST /token`` (HTTPS, certificate from
the test CA) runs the client-credentials grant and signs RS256 JWTs with PyJWT; ``GET
/jwks`` (plain HTTP, which the broker may fetch from the loopback) publishes the public
key.  The broker validates tokens with Kafka's own ``OAuthBearerValidatorCallbackHandler``
(KIP-768): signature against the JWKS, ``exp``, audience and issuer.  Kafka 4 fetches
only URLs listed in the ``org.apache.kafka.sasl.oauthbearer.allowed.urls`` system
property (see ``ConfigurationUtils.throwIfURLIsNotAllowed`` in kafka-clients).
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from tests.kafka.secure_broker import _certificates, _free_ports

CLIENT_ID, CLIENT_SECRET, AUDIENCE = "txnwatch", "oidc-client-secret", "kafka"


@dataclass
class Issuer:
    """Mints tokens for one client; counts what it handed out so tests can see refreshes."""

    base_https: str
    base_http: str
    ca: Path
    lifetime_s: int = 3600
    issued: list[dict[str, Any]] = field(default_factory=list)

    @property
    def token_url(self) -> str:
        return f"{self.base_https}/token"

    @property
    def jwks_url(self) -> str:
        return f"{self.base_http}/jwks"


def _handler(issuer: Issuer, key: rsa.RSAPrivateKey, kid: str) -> type[BaseHTTPRequestHandler]:
    jwk = json.loads(RSAAlgorithm.to_jwk(key.public_key()))
    jwks = json.dumps({"keys": [{**jwk, "kid": kid, "use": "sig", "alg": "RS256"}]}).encode()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # keep pytest output clean
            pass

        def _reply(self, status: int, body: dict[str, Any] | bytes) -> None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._reply(200, jwks) if self.path == "/jwks" else self._reply(404, {"error": "not_found"})

        def do_POST(self) -> None:
            form = parse_qs(self.rfile.read(int(self.headers.get("Content-Length", 0))).decode())
            expected = "Basic " + base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode()
            if self.path != "/token" or form.get("grant_type") != ["client_credentials"]:
                self._reply(400, {"error": "unsupported_grant_type"})
            elif self.headers.get("Authorization") != expected:
                self._reply(401, {"error": "invalid_client", "error_description": "bad client credentials"})
            else:
                now = int(time.time())
                claims = {"sub": CLIENT_ID, "iss": issuer.base_http, "aud": AUDIENCE, "iat": now,
                          "exp": now + issuer.lifetime_s, "scope": form.get("scope", [""])[0]}
                issuer.issued.append(claims)
                token = jwt.encode(claims, key, algorithm="RS256", headers={"kid": kid})
                self._reply(200, {"access_token": token, "token_type": "Bearer", "expires_in": issuer.lifetime_s})

    return Handler


@contextmanager
def oidc_issuer(directory: Path) -> Iterator[Issuer]:
    """HTTPS token endpoint and HTTP JWKS on 127.0.0.1 (certificates under ``directory``)."""
    _certificates(directory)
    https_port, http_port = _free_ports(2)
    issuer = Issuer(f"https://127.0.0.1:{https_port}", f"http://127.0.0.1:{http_port}", directory / "ca.pem")
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    handler = _handler(issuer, key, kid=uuid.uuid4().hex)
    secure = ThreadingHTTPServer(("127.0.0.1", https_port), handler)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(directory / "server.crt", directory / "server.key")
    secure.socket = context.wrap_socket(secure.socket, server_side=True)
    plain = ThreadingHTTPServer(("127.0.0.1", http_port), handler)
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in (secure, plain)]
    for t in threads:
        t.start()
    try:
        yield issuer
    finally:
        for s in (secure, plain):
            s.shutdown()
            s.server_close()


def broker_properties(issuer: Issuer) -> list[str]:
    """OAUTHBEARER on the secure broker's SASL_PLAINTEXT listener, validated against ``issuer``'s JWKS."""
    prefix = "listener.name.sasl_plaintext.oauthbearer."
    return [
        f"{prefix}sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;",
        (f"{prefix}sasl.server.callback.handler.class="
         "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"),
        f"sasl.oauthbearer.jwks.endpoint.url={issuer.jwks_url}",
        f"sasl.oauthbearer.expected.audience={AUDIENCE}",
        f"sasl.oauthbearer.expected.issuer={issuer.base_http}",
    ]


def broker_jvm_options(issuer: Issuer) -> list[str]:
    return [f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={issuer.jwks_url}"]
