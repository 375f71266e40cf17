"""AWS_MSK_IAM: the SASL payload kafka-python sends, checked against AWS's own SigV4 presigner.

No MSK broker runs here, so the test pins the wire exchange: the JSON message's fields
(aws-msk-iam-auth's documented "2020_10_22" format) and its signature, which must equal
what botocore's ``SigV4QueryAuth`` computes for ``GET https://<broker>/?Action=kafka-cluster:Connect``
with the same credentials, region and instant.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import botocore.auth
import pytest
from botocore.auth import SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from txnwatch.core.config import ClusterConfig
from txnwatch.kafka.msk import AwsCredentials, MskIamError, MskIamMechanism, MskIamSigner, region_from_host
from txnwatch.kafka.settings import ClusterConnectionSettings

HOST = "b-1.demo.abc123.c2.kafka.eu-west-1.amazonaws.com"
NOW = datetime.datetime(2026, 3, 4, 5, 6, 7, tzinfo=datetime.UTC)
CREDS = AwsCredentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "session/token+1")


def _reference_query(host: str, region: str, creds: AwsCredentials) -> dict[str, str]:
    """botocore's presigned query for the MSK Connect action, at NOW (botocore reads its clock in add_auth)."""
    request = AWSRequest(method="GET", url=f"https://{host}/?Action=kafka-cluster%3AConnect")
    auth = SigV4QueryAuth(Credentials(creds.access_key, creds.secret_key, creds.session_token),
                          "kafka-cluster", region, expires=900)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(botocore.auth, "get_current_datetime", lambda: NOW.replace(tzinfo=None))
        auth.add_auth(request)
    query = {k: v[0] for k, v in parse_qs(urlsplit(request.url).query).items()}
    assert query["X-Amz-Date"] == "20260304T050607Z"
    return query


def test_payload_matches_the_documented_format_and_awss_signature() -> None:
    mechanism = MskIamMechanism(host=HOST, security_protocol="SASL_SSL",
                                sasl_oauth_token_provider=MskIamSigner(credentials=CREDS, clock=NOW.timestamp))
    message = json.loads(mechanism.auth_bytes())
    reference = _reference_query(HOST, "eu-west-1", CREDS)
    assert message == {
        "version": "2020_10_22", "host": HOST, "user-agent": "kafka-python", "action": "kafka-cluster:Connect",
        "x-amz-algorithm": "AWS4-HMAC-SHA256",
        "x-amz-credential": "AKIDEXAMPLE/20260304/eu-west-1/kafka-cluster/aws4_request",
        "x-amz-date": "20260304T050607Z", "x-amz-signedheaders": "host", "x-amz-expires": "900",
        "x-amz-security-token": "session/token+1",
        "x-amz-signature": reference["X-Amz-Signature"],
    }
    assert reference["X-Amz-Credential"] == message["x-amz-credential"]
    mechanism.receive(b'{"version":"2020_10_22","request-id":"r-1"}')
    assert mechanism.is_authenticated()


def test_configured_region_wins_and_a_different_instant_changes_the_signature() -> None:
    later = NOW.timestamp() + 1
    a = json.loads(MskIamSigner(region="us-east-2", credentials=CREDS, clock=NOW.timestamp).payload(HOST))
    b = json.loads(MskIamSigner(region="us-east-2", credentials=CREDS, clock=lambda: later).payload(HOST))
    assert a["x-amz-credential"].split("/")[2] == "us-east-2"
    assert a["x-amz-signature"] == _reference_query(HOST, "us-east-2", CREDS)["X-Amz-Signature"]
    assert a["x-amz-signature"] != b["x-amz-signature"]


def test_credentials_and_region_from_the_standard_chain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
                 "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    (tmp_path / "credentials").write_text("[watch]\naws_access_key_id = AKIDPROFILE\naws_secret_access_key = s\n")
    (tmp_path / "config").write_text("[profile watch]\nregion = ap-south-1\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    region, creds = MskIamSigner(profile="watch").resolve("broker.internal")
    assert (region, creds.access_key) == ("ap-south-1", "AKIDPROFILE")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDENV")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "e")
    region, creds = MskIamSigner().resolve(HOST)
    assert (region, creds.access_key) == ("eu-west-1", "AKIDENV")  # region from the MSK host name
    with pytest.raises(MskIamError, match="no AWS region"):
        MskIamSigner().resolve("broker.internal")


def test_region_from_msk_host_names() -> None:
    assert region_from_host(HOST) == "eu-west-1"
    assert region_from_host("boot-abc.c3.kafka-serverless.us-east-1.amazonaws.com") == "us-east-1"
    assert region_from_host("kafka.example.com") is None


def test_configuration_reaches_the_mechanism() -> None:
    config = ClusterConfig(name="msk", bootstrap_servers=[f"{HOST}:9098"], security_protocol="SASL_SSL",
                           sasl_mechanism="AWS_MSK_IAM", aws_region="eu-west-1", aws_profile="watch")
    settings = ClusterConnectionSettings.from_config(config)
    signer = settings.client_config()["sasl_oauth_token_provider"]
    assert isinstance(signer, MskIamSigner)
    with pytest.raises(ValueError, match="SASL_SSL"):
        ClusterConfig(name="msk", bootstrap_servers=["b:9098"], security_protocol="SASL_PLAINTEXT",
                      sasl_mechanism="AWS_MSK_IAM")
