"""SASL AWS_MSK_IAM: Amazon MSK's IAM access control, with per-cluster region and profile.

The broker expects one JSON message (aws-msk-iam-auth's "2020_10_22" format): an AWS
Signature Version 4 pre-signed ``GET /?Action=kafka-cluster:Connect`` for the broker's
host, service ``kafka-cluster``, valid for 900 s.  kafka-python 3 builds exactly that
(``kafka.net.sasl.msk.AwsMskIamClient``), but its mechanism takes the region and the
credentials from a default botocore session, i.e. from the process environment, so two
clusters in two regions or accounts could not be watched by one process.

:class:`MskIamSigner` holds one cluster's region and profile (and, for tests, a clock
and fixed credentials).  kafka-python hands a mechanism only the keys of its own
config, so the signer travels in the one slot that carries an arbitrary object,
``sasl_oauth_token_provider`` (which only the OAUTHBEARER mechanism otherwise reads);
:class:`MskIamMechanism`, registered under ``AWS_MSK_IAM`` in place of kafka-python's,
takes it from there.  Credentials come from botocore's standard chain (environment,
shared credentials/config profile, web identity, container and instance metadata), as
in every AWS SDK; botocore is the ``txnwatch[msk]`` extra.
"""

from __future__ import annotations

import datetime
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kafka.errors import KafkaConfigurationError
from kafka.net.sasl import register_sasl_mechanism
from kafka.net.sasl.msk import AwsMskIamClient, SaslMechanismAwsMskIam

#: MSK broker names carry the region: b-1.<cluster>.<id>.c2.kafka.<region>.amazonaws.com (also kafka-serverless).
_HOST_REGION = re.compile(r"\.kafka(?:-serverless)?\.([a-z]{2}(?:-[a-z]+)+-\d+)\.amazonaws\.com(?:\.cn)?$")


@dataclass(frozen=True)
class AwsCredentials:
    access_key: str
    secret_key: str = field(repr=False)
    session_token: str | None = field(default=None, repr=False)


class MskIamError(Exception):
    """No region or no credentials: phrased for the operator, without any secret."""


def region_from_host(host: str) -> str | None:
    match = _HOST_REGION.search(host.lower())
    return match.group(1) if match else None


class MskIamSigner:
    """One cluster's signing identity: region, profile, credentials chain, clock."""

    def __init__(self, *, region: str | None = None, profile: str | None = None,
                 credentials: AwsCredentials | None = None, clock: Callable[[], float] = time.time) -> None:
        self._region, self._profile, self._fixed, self._clock = region, profile, credentials, clock
        self.last_error: str | None = None
        self._chain: Any = None

    def _session(self) -> Any:
        from txnwatch.core.extras import MissingExtra, require

        try:
            require("botocore")
        except MissingExtra as exc:
            raise MskIamError(str(exc)) from None
        from botocore.session import Session

        return Session(profile=self._profile)

    def resolve(self, host: str) -> tuple[str, AwsCredentials]:
        """Region (configured, else the broker's host name, else the AWS config chain) and fresh credentials."""
        session = None
        region = self._region or region_from_host(host)
        if region is None:
            session = self._session()
            region = session.get_config_variable("region")
        if not region:
            raise MskIamError("no AWS region for AWS_MSK_IAM: set aws_region, AWS_REGION or the profile's region")
        if self._fixed is not None:
            return region, self._fixed
        found = self._chain
        if found is None:  # resolved once: botocore's refreshable credentials renew themselves before expiry
            found = self._chain = (session or self._session()).get_credentials()
        if found is None:
            raise MskIamError("no AWS credentials found (environment, shared credentials file, profile, web identity, "
                              "container or instance metadata)")
        frozen = found.get_frozen_credentials()  # refreshes temporary credentials that are about to expire
        return region, AwsCredentials(frozen.access_key, frozen.secret_key, frozen.token)

    def payload(self, host: str) -> bytes:
        """The SASL message for ``host``, signed now."""
        try:
            region, credentials = self.resolve(host)
        except MskIamError as exc:
            self.last_error = str(exc)  # kafka-python reports a failed login only as a timeout
            raise
        self.last_error = None
        client = AwsMskIamClient(host=host, access_key=credentials.access_key, secret_key=credentials.secret_key,
                                 region=region, token=credentials.session_token)
        # kafka-python stamps the wall clock in its constructor; the signer's clock decides instead.
        now = datetime.datetime.fromtimestamp(self._clock(), tz=datetime.UTC)
        client.datestamp = now.strftime("%Y%m%d")
        client.timestamp = now.strftime("%Y%m%dT%H%M%SZ")
        message: bytes = client.first_message()
        return message


class MskIamMechanism(SaslMechanismAwsMskIam):  # type: ignore[misc]  # kafka-python is untyped
    """kafka-python's AWS_MSK_IAM exchange, signed by the cluster's :class:`MskIamSigner`."""

    def __init__(self, **config: Any) -> None:
        signer = config.get("sasl_oauth_token_provider")
        if not isinstance(signer, MskIamSigner):
            signer = MskIamSigner()  # kafka-python's own behaviour: the default AWS chain
        if config.get("security_protocol", "") != "SASL_SSL":
            raise KafkaConfigurationError("AWS_MSK_IAM requires SASL_SSL")
        if "host" not in config:
            raise KafkaConfigurationError("AWS_MSK_IAM requires host configuration")
        self.host = config["host"]
        self._signer = signer
        self._auth = None
        self._is_done = False
        self._is_authenticated = False

    def auth_bytes(self) -> bytes:
        return self._signer.payload(self.host)


register_sasl_mechanism("AWS_MSK_IAM", MskIamMechanism, overwrite=True)
