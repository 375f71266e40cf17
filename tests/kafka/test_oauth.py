"""OIDC client-credentials token provider: refresh timing on an injected clock, failures, secrets kept out."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from txnwatch.kafka.oauth import OAuthSettings, OidcTokenProvider, TokenError, _jwt_expiry_s
from txnwatch.kafka.settings import ClusterConnectionSettings

SETTINGS = OAuthSettings(token_endpoint_url="https://idp.example/token", client_id="txnwatch",
                         client_secret="s3cret", scope="kafka", extensions={"logicalCluster": "lkc-1"})


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


class Endpoint:
    """Hands out numbered tokens valid for ``lifetime`` seconds, or fails when told to."""

    def __init__(self, lifetime: float = 100) -> None:
        self.lifetime, self.issued, self.failing = lifetime, 0, False

    def __call__(self, settings: OAuthSettings) -> Mapping[str, Any]:
        assert settings is SETTINGS
        if self.failing:
            raise TokenError("token endpoint https://idp.example/token answered HTTP 503")
        self.issued += 1
        return {"access_token": f"token-{self.issued}", "expires_in": self.lifetime, "token_type": "Bearer"}


def test_token_is_reused_until_80_percent_of_its_lifetime_then_refreshed() -> None:
    clock, endpoint = Clock(), Endpoint(lifetime=100)
    provider = OidcTokenProvider(SETTINGS, clock=clock, request=endpoint)
    assert provider.token() == "token-1"
    clock.now += 79.9
    assert provider.token() == "token-1" and endpoint.issued == 1
    clock.now += 0.1  # 80 s of 100: Kafka's sasl.login.refresh.window.factor
    assert provider.token() == "token-2"
    assert provider.extensions() == {"logicalCluster": "lkc-1"}


def test_failed_refresh_keeps_the_valid_token_and_retries_later() -> None:
    clock, endpoint = Clock(), Endpoint(lifetime=100)
    provider = OidcTokenProvider(SETTINGS, clock=clock, request=endpoint)
    provider.token()
    endpoint.failing = True
    clock.now += 85
    assert provider.token() == "token-1"
    attempts = provider.requests
    clock.now += 5  # inside the retry back-off: no new request
    assert provider.token() == "token-1" and provider.requests == attempts
    clock.now += 6  # 96 s: back-off over, still failing, token still valid
    assert provider.token() == "token-1" and provider.requests == attempts + 1
    clock.now += 5  # 101 s: expired and no new one
    with pytest.raises(TokenError, match="HTTP 503"):
        provider.token()
    endpoint.failing = False
    assert provider.token() == "token-2"


def test_lifetime_from_the_jwt_exp_claim_when_expires_in_is_missing() -> None:
    claims = base64.urlsafe_b64encode(json.dumps({"exp": 1_600}).encode()).decode().rstrip("=")
    jwt = f"e30.{claims}.sig"
    assert _jwt_expiry_s(jwt) == 1_600
    clock = Clock()
    provider = OidcTokenProvider(SETTINGS, clock=clock, request=lambda _: {"access_token": jwt})
    provider.token()
    clock.now = 1_000 + 0.8 * 600 - 1
    assert provider.requests == 1 and provider.token() == jwt and provider.requests == 1
    clock.now += 1
    provider.token()
    assert provider.requests == 2


@pytest.mark.parametrize("answer", [
    pytest.param({}, id="no-access-token"),
    pytest.param({"access_token": "t", "expires_in": 0}, id="already-expired"),
])
def test_unusable_answers_are_errors_that_name_the_endpoint(answer: dict[str, Any]) -> None:
    provider = OidcTokenProvider(SETTINGS, clock=Clock(), request=lambda _: answer)
    with pytest.raises(TokenError, match=r"idp\.example"):
        provider.token()


def test_secret_sources_and_that_the_secret_is_never_shown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret_file = tmp_path / "secret"
    secret_file.write_text("from-file\n")
    assert OAuthSettings("https://i/t", "c", client_secret_file=str(secret_file)).secret() == "from-file"
    monkeypatch.setenv("IDP_SECRET", "from-env")
    assert OAuthSettings("https://i/t", "c", client_secret_env="IDP_SECRET").secret() == "from-env"
    monkeypatch.delenv("IDP_SECRET")
    with pytest.raises(TokenError, match="IDP_SECRET"):
        OAuthSettings("https://i/t", "c", client_secret_env="IDP_SECRET").secret()
    settings = ClusterConnectionSettings(name="c", bootstrap_servers=("b:9093",), security_protocol="SASL_SSL",
                                         sasl_mechanism="OAUTHBEARER", oauth=SETTINGS)
    assert "s3cret" not in repr(settings) and "s3cret" not in repr(SETTINGS)
    config = settings.client_config()
    assert isinstance(config["sasl_oauth_token_provider"], OidcTokenProvider)
    assert config["sasl_oauth_token_provider"] is settings.client_config()["sasl_oauth_token_provider"]
