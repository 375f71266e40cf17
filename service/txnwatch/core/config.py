"""Typed settings: one object, read from a YAML file and `TXNWATCH_*` environment variables.

Precedence (highest first): explicit overrides, environment, YAML file, defaults.
Nested fields use ``__`` in the environment, e.g. ``TXNWATCH_PAGERDUTY__ROUTING_KEY``.
Validation happens once, at start, and every mistake becomes one line of a
:class:`ConfigError` naming where it came from (the file or the ``TXNWATCH_*`` variable),
the key, what is wrong and what is allowed, so an operator fixes them all in one go and
never reads a traceback.
"""

from __future__ import annotations

import difflib
import importlib.util
import ipaddress
import json
import os
import re
from pathlib import Path
from types import UnionType
from typing import Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict, SettingsError

from txnwatch.core.idpattern import compile_name_filter, pattern_problem
from txnwatch.core.keytab import keytab_problem, principal_problem
from txnwatch.core.redact import redact
from txnwatch.core.vocabulary import Severity

CONFIG_ENV = "TXNWATCH_CONFIG"
SUPPORTED_DB_SCHEMES = ("sqlite", "postgresql", "postgresql+psycopg", "postgres")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
_LABEL = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_EXPORTER_LABELS = frozenset({"consumergroup", "topic", "partition", "le"})


class ConfigError(Exception):
    """Configuration problems, already phrased for the operator: one line each in ``problems``.

    Passwords in URLs are masked here, whoever phrased the line: a value is echoed back to say what was
    wrong with it, and a database URL carries its password."""

    def __init__(self, *problems: str) -> None:
        problems = tuple(redact(problem) for problem in problems)
        super().__init__("\n".join(problems))
        self.problems = list(problems)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _check_regexes(patterns: list[str]) -> list[str]:
    """Each pattern compiles; one line naming the first that does not.

    Patterns must match a whole name (``re.fullmatch``) over every character (``re.DOTALL``: ``.`` matches a
    newline too, so ``.*`` is every name; txnwatch.core.idpattern.compile_name_filter), so a pattern written for
    kafka_exporter's search semantics (``^orders``) needs its ``.*`` (``orders.*``).  Python's engine backtracks: a
    pattern with nested quantifiers such as ``(a+)+`` can take exponential time on a long tenant
    name; keep patterns to prefixes, alternations and character classes.
    """
    for pattern in patterns:
        try:
            compile_name_filter(pattern)
        except re.error as exc:
            raise ValueError(f"invalid regular expression {pattern!r}: {exc}") from None
    return patterns


#: Kafka's legal topic-name characters (Topic.LEGAL_CHARS) and its 249-character limit.
_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


class CanaryConfig(_Strict):
    """The transactional canary of one cluster (docs/canary.md): txnwatch's own transactional producer commits a tiny
    transaction on every partition of its own topic each interval, and a read_committed reader confirms it.

    Off by default: it writes to the cluster and needs ACLs a read-only txnwatch does not have (Write and Describe on
    its transactional id, Write and Read on its topic, Create on the topic unless it is made beforehand)."""

    enabled: bool = False
    topic: str = Field(default="_txnwatch_canary", description=(
        "The canary's own topic: created by txnwatch (one partition led by each broker, as KMinion's end-to-end "
        "topic) unless it exists; a broker that leads none of its partitions gets a new one."))
    transactional_id: str | None = Field(default=None, max_length=200, description=(
        "The canary producer's transactional.id; default txnwatch-canary-<cluster name>. Stable on purpose: a "
        "restarted (or another replica's) canary fences the one before instead of leaving ids behind."))
    interval_seconds: float = Field(default=15, ge=1, le=3600, description="How often a round of transactions "
                                    "(one per partition) is committed.")
    replication_factor: int = Field(default=3, ge=1, le=32, description=(
        "Replicas of each partition of a topic txnwatch creates (capped at the number of brokers)."))
    transaction_timeout_ms: int = Field(default=10_000, ge=1_000, le=900_000, description=(
        "The canary producer's transaction.timeout.ms; must not exceed the brokers' transaction.max.timeout.ms."))
    timeout_ms: int = Field(default=5_000, ge=500, le=120_000, description=(
        "How long one step (init, send, commit, the reader seeing the record) may take before the round counts it "
        "as failed."))
    failures_to_alert: int = Field(default=2, ge=1, le=100, description=(
        "Consecutive failed rounds before the finding 'transactions cannot commit' opens (one success closes it); "
        "the alert rule's for_seconds then applies."))

    @field_validator("topic")
    @classmethod
    def _topic(cls, value: str) -> str:
        if not _TOPIC.match(value) or value in (".", ".."):
            raise ValueError("must be 1-249 characters of letters, digits, '.', '_' or '-' (Kafka's topic names)")
        return value

    @field_validator("transactional_id")
    @classmethod
    def _transactional_id(cls, value: str | None) -> str | None:
        if value is not None and (not value.strip() or not value.isprintable()):
            raise ValueError("must be printable text, not blank")
        return value

    def transactional_id_for(self, cluster: str) -> str:
        return self.transactional_id or f"txnwatch-canary-{cluster}"


class ClusterConfig(_Strict):
    """One Kafka cluster to watch."""

    name: str = Field(description="Short name used in metrics labels, API paths and alerts.")
    bootstrap_servers: list[str] = Field(min_length=1, description="host:port of one or more brokers.")
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI", "AWS_MSK_IAM"] | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    sasl_password_file: Path | None = Field(default=None, description=(
        "File holding the SASL password, e.g. a mounted Kubernetes Secret key; its exact content is the "
        "password (no trailing newline is stripped, no escaping applies). Instead of sasl_password."))
    sasl_oauth_token_endpoint_url: str | None = Field(default=None, description="OAUTHBEARER: the OIDC provider's "
                                                      "token endpoint (client-credentials grant), https://.")
    sasl_oauth_client_id: str | None = None
    sasl_oauth_client_secret: SecretStr | None = None
    sasl_oauth_client_secret_file: Path | None = Field(default=None, description="File holding the client secret, "
                                                       "re-read at every token request (a mounted Kubernetes secret).")
    sasl_oauth_client_secret_env: str | None = Field(default=None, description="Environment variable holding the "
                                                     "client secret.")
    sasl_oauth_scope: str | None = None
    sasl_oauth_ca_file: Path | None = Field(default=None, description="CA bundle for the token endpoint's TLS "
                                            "certificate; default: the system's.")
    sasl_oauth_extensions: dict[str, str] = Field(default_factory=dict, description="SASL extensions sent with the "
                                                  "token (Confluent Cloud: logicalCluster, identityPoolId).")
    sasl_kerberos_service_name: str = Field(default="kafka", description="GSSAPI: the brokers' Kerberos service name.")
    sasl_kerberos_domain_name: str | None = Field(default=None, description="GSSAPI: host part of the brokers' "
                                                  "principal when it is not the broker's host name.")
    sasl_kerberos_principal: str | None = Field(default=None, description=(
        "GSSAPI: txnwatch's own principal, name@REALM. With sasl_kerberos_keytab it logs in with the key held "
        "there; alone, with that principal's ticket in the credential cache (KRB5CCNAME). Unset: the process's "
        "default credentials."))
    sasl_kerberos_keytab: Path | None = Field(default=None, description=(
        "GSSAPI: keytab holding sasl_kerberos_principal's key, e.g. a mounted Kubernetes Secret; txnwatch gets "
        "its tickets from it and new ones before they expire. Clusters may name different keytabs."))
    aws_region: str | None = Field(default=None, description="AWS_MSK_IAM: region; default: from the broker host "
                                   "name, else AWS_REGION / the profile.")
    aws_profile: str | None = Field(default=None, description="AWS_MSK_IAM: named profile of the shared AWS config.")
    ssl_cafile: Path | None = None
    ssl_certfile: Path | None = None
    ssl_keyfile: Path | None = None
    ssl_check_hostname: bool = True
    request_timeout_ms: int = Field(default=10_000, ge=100, le=300_000)
    max_response_bytes: int = Field(default=24 * 1024 * 1024, ge=24 * 1024 * 1024, le=1024 * 1024 * 1024,
                                    description=(
        "Largest answer frame read from a broker: one whose size field says more is refused before it is read, "
        "the connection closed and the poll failed, naming the broker. The default is the transaction-log "
        "tail's largest fetch (16 MiB plus a 4 MiB partition) and 4 MiB of room (Metadata of ~150,000 "
        "partitions); it cannot be lower. See docs/threat-model.md."))
    max_response_entries: int = Field(default=1_000_000, ge=10_000, le=100_000_000, description=(
        "Most entries (in all its arrays) decoded from one broker answer; more are refused before they are "
        "decoded, the connection closed and the poll failed. Metadata of 80,000 partitions at replication "
        "factor 3 holds ~560,000. See docs/threat-model.md."))
    connect_timeout_ms: int = Field(default=5_000, ge=100, le=300_000, description="How long the first "
                                    "connection (TCP, TLS, SASL, metadata) may take before the cluster is "
                                    "reported unreachable.")
    transactional_id_pattern: str | None = Field(default=None, description=(
        "Only transactional ids this pattern matches as a whole are listed, described and kept (tenancy). "
        "Kafka 4.1+ brokers filter themselves (ListTransactions v2, KIP-1152); older ones are filtered by "
        "txnwatch, with the same result. The broker reads it with RE2/J, so only the subset RE2/J and "
        "Python read alike is accepted (docs/configuration.md)."))
    topics_include: list[str] = Field(default_factory=lambda: [".*"], description="Topics watched: regular "
                                      "expressions that must match the whole name (kafka_exporter's --topic.filter, "
                                      "KMinion's allowedTopics).")
    topics_exclude: list[str] = Field(default_factory=lambda: ["^__.*"], description="Topics left out even if "
                                      "included, whole-name matches (--topic.exclude, ignoredTopics).")
    groups_include: list[str] = Field(default_factory=lambda: [".*"], description="Consumer groups whose offsets "
                                      "are fetched: whole-name matches (kafka_exporter's --group.filter, KMinion's "
                                      "allowedGroups).")
    groups_exclude: list[str] = Field(default_factory=list, description="Consumer groups left out even if "
                                      "included, whole-name matches (--group.exclude, ignoredGroups).")
    max_groups: int = Field(default=500, ge=0, le=1_000_000, description="Consumer groups given lag series, "
                            "lag rows and API rows per poll, the most lagging first; the rest are counted in "
                            "txnwatch_cardinality_omitted (docs/metrics.md).")
    max_group_partitions: int = Field(default=20_000, ge=0, le=10_000_000, description="Group partitions over "
                                      "all kept groups; a group is kept or left out whole (20,000: a lab of 12,000 is served whole, "
                                      "docs/performance.md gives the cost).")
    lag_sample_interval_seconds: float | None = Field(default=None, ge=0, le=86_400, description="Overrides the "
                                                      "top-level lag_sample_interval_seconds for this cluster.")
    offset_sample_interval_seconds: float | None = Field(default=None, ge=0, le=86_400, description="Overrides "
                                                         "the top-level offset_sample_interval_seconds for this "
                                                         "cluster.")
    poll_interval_seconds: float | None = Field(default=None, ge=1, le=3600)
    time_lag_fetches_per_poll: int = Field(default=200, ge=0, le=10_000, description="Lagging group partitions "
                                           "whose first unconsumed record is fetched per poll to measure time lag "
                                           "(cached per offset; 0 disables the fetches).")
    metric_labels: dict[str, str] = Field(default_factory=dict, description="Constant labels on this cluster's "
                                          "kafka_* series, like kafka_exporter's --kafka.labels.")
    broker_metrics_urls: dict[str, str] = Field(
        default_factory=dict, description="Per broker (id or any label), the URL of its Prometheus JMX exporter "
        "(e.g. http://kafka-1:7071/metrics): txnwatch reads the brokers' own KIP-890 VerificationTimeMs / "
        "VerificationFailureRate from it and shows them next to its own partition-side figures.")
    broker_metrics_url_template: str | None = Field(
        default=None, description="Derive each broker's exporter URL from the cluster metadata, e.g. "
        "'http://{host}:7071/metrics' ({host} and {node_id} are filled in); broker_metrics_urls entries win.")
    broker_metrics_timeout_ms: int = Field(default=2_000, ge=100, le=60_000,
                                           description="Bound on each exporter request (connect and read).")
    canary: CanaryConfig = Field(default_factory=CanaryConfig, description=(
        "The transactional canary (docs/canary.md): off unless enabled."))

    @field_validator("broker_metrics_urls")
    @classmethod
    def _exporter_urls(cls, value: dict[str, str]) -> dict[str, str]:
        for broker, url in value.items():
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"broker {broker!r}: {url!r} is not an http(s) URL")
        return value

    @field_validator("broker_metrics_url_template")
    @classmethod
    def _exporter_template(cls, value: str | None) -> str | None:
        if value is None:
            return value
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"{value!r} is not an http(s) URL")
        try:
            value.format(host="h", node_id=1)
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(f"{value!r}: only {{host}} and {{node_id}} can be filled in ({exc!r})") from None
        return value

    @field_validator("metric_labels")
    @classmethod
    def _metric_labels(cls, value: dict[str, str]) -> dict[str, str]:
        for key in value:
            if not _LABEL.match(key) or key in _EXPORTER_LABELS:
                raise ValueError(f"{key!r} is not a usable label name (letters, digits, '_'; not one of "
                                 f"{', '.join(sorted(_EXPORTER_LABELS))})")
        return value

    @model_validator(mode="before")
    @classmethod
    def _password_from_file(cls, data: Any) -> Any:
        """The password file is read here, once, so a missing or unreadable file is a config error at start.

        A file and not an environment variable or a JSON fragment: its bytes reach the SASL login
        exactly as the Secret holds them, whatever quotes, backslashes, ``$`` or unicode they contain.
        """
        if not isinstance(data, dict) or data.get("sasl_password_file") in (None, ""):
            return data
        if data.get("sasl_password") is not None:
            raise ValueError("set sasl_password or sasl_password_file, not both")
        path = Path(data["sasl_password_file"])
        try:
            password = path.read_bytes().decode("utf-8")
        except OSError as exc:
            raise ValueError(f"sasl_password_file {str(path)!r}: cannot read: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise ValueError(f"sasl_password_file {str(path)!r}: not UTF-8 text") from None
        return {**data, "sasl_password": SecretStr(password)}

    @field_validator("sasl_kerberos_principal")
    @classmethod
    def _kerberos_principal(cls, value: str | None) -> str | None:
        if value is not None:
            problem = principal_problem(value)
            if problem:
                raise ValueError(problem)
        return value

    @field_validator("sasl_kerberos_keytab")
    @classmethod
    def _kerberos_keytab(cls, value: Path | None) -> Path | None:
        problem = None if value is None else keytab_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError("must be 1-63 characters of letters, digits, '.', '_' or '-'")
        return value

    @field_validator("bootstrap_servers", mode="before")
    @classmethod
    def _split_servers(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("bootstrap_servers")
    @classmethod
    def _servers(cls, value: list[str]) -> list[str]:
        for server in value:
            host, sep, port = server.rpartition(":")
            if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"{server!r} is not host:port")
        return value

    @field_validator("transactional_id_pattern")
    @classmethod
    def _id_pattern(cls, value: str | None) -> str | None:
        problem = None if value is None else pattern_problem(value)
        if problem:
            raise ValueError(f"transactional_id_pattern {value!r} {problem}")
        return value

    @field_validator("topics_include", "topics_exclude", "groups_include", "groups_exclude")
    @classmethod
    def _regexes(cls, value: list[str]) -> list[str]:
        return _check_regexes(value)

    @model_validator(mode="after")
    def _security(self) -> ClusterConfig:
        kerberos = [name for name in _KERBEROS_OPTIONS if getattr(self, name) is not None]
        if kerberos and self.sasl_mechanism != "GSSAPI":
            raise ValueError(f"{'/'.join(kerberos)} {'is' if len(kerberos) == 1 else 'are'} for sasl_mechanism "
                             f"GSSAPI, not {self.sasl_mechanism or self.security_protocol}")
        if self.security_protocol.startswith("SASL"):
            if self.sasl_mechanism is None:
                raise ValueError(f"security_protocol {self.security_protocol} needs sasl_mechanism")
            problem = _sasl_problem(self)
            if problem:
                raise ValueError(problem)
        elif self.sasl_mechanism is not None:
            raise ValueError(f"sasl_mechanism is set but security_protocol is {self.security_protocol}")
        return self


_OAUTH_SECRETS = ("sasl_oauth_client_secret", "sasl_oauth_client_secret_file", "sasl_oauth_client_secret_env")
_LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


_KERBEROS_OPTIONS = ("sasl_kerberos_principal", "sasl_kerberos_keytab")


def _sasl_problem(c: ClusterConfig) -> str | None:
    """What is missing or contradictory for the chosen mechanism, in one sentence; None if nothing."""
    mechanism = c.sasl_mechanism
    if mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        if not c.sasl_username or c.sasl_password is None:
            return f"SASL {mechanism} needs sasl_username and sasl_password (or sasl_password_file)"
        return None
    if c.sasl_username or c.sasl_password is not None:
        return f"sasl_username/sasl_password are for PLAIN and SCRAM, not {mechanism}"
    if mechanism == "OAUTHBEARER":
        url = c.sasl_oauth_token_endpoint_url
        if not url or not c.sasl_oauth_client_id:
            return "OAUTHBEARER needs sasl_oauth_token_endpoint_url and sasl_oauth_client_id"
        scheme, _, rest = url.partition("://")
        host = rest.split("/", 1)[0].rsplit(":", 1)[0].strip("[]")
        if scheme != "https" and not (scheme == "http" and host in _LOOPBACK_HOSTS):
            return "sasl_oauth_token_endpoint_url must be https:// (the client secret travels in the request)"
        given = [name for name in _OAUTH_SECRETS if getattr(c, name) is not None]
        if len(given) != 1:
            return f"OAUTHBEARER needs exactly one of {', '.join(_OAUTH_SECRETS)}"
    if mechanism == "GSSAPI":
        if importlib.util.find_spec("gssapi") is None:
            return ("GSSAPI needs the Python package gssapi and the system's Kerberos libraries: "
                    "pip install 'txnwatch[kerberos]' (Debian: libkrb5-dev to build it)")
        if c.sasl_kerberos_keytab is not None and c.sasl_kerberos_principal is None:
            return "sasl_kerberos_keytab needs sasl_kerberos_principal: the principal whose key it holds"
    if mechanism == "AWS_MSK_IAM":
        if c.security_protocol != "SASL_SSL":
            return "AWS_MSK_IAM needs security_protocol SASL_SSL"
        if importlib.util.find_spec("botocore") is None:
            return "AWS_MSK_IAM needs botocore: pip install 'txnwatch[msk]'"
    return None


class DetectionConfig(_Strict):
    """Thresholds of the detectors; see docs/detection.md for what each one trades off."""

    hanging_margin_seconds: float = Field(default=0, ge=0, description="Added to transaction.max.timeout.ms before an open transaction on a partition counts as hanging.")
    timeout_grace_seconds: float = Field(default=30, ge=0, description="How long past its own transaction.timeout.ms a transaction may stay open.")
    prepare_stuck_seconds: float = Field(default=30, ge=1, description="How long PrepareCommit/PrepareAbort may last.")
    lso_stall_seconds: float = Field(default=30, ge=1, description="How long the LSO may stay put while the high watermark moves.")
    verification_grace_seconds: float = Field(default=10, ge=0, description="How long a partition may hold an open transaction the coordinator does not list.")
    verification_failure_ratio: float = Field(default=0.0, ge=0, le=1, description="Share of failed verification checks per poll above which the verification_failure_rate alert condition holds.")


class MetricsConfig(_Strict):
    """How /metrics labels and cuts the offset and lag families (see docs/metrics.md)."""

    granularity: Literal["partition", "topic"] = Field(default="partition", description="topic: consumer-group "
                                                       "series per topic only (KMinion's option), for big clusters.")
    cluster_label: str = Field(default="cluster", description="Label carrying the cluster name on the kafka_* "
                               "families; empty for none, as a single-cluster kafka_exporter has.")
    port: int | None = Field(default=None, ge=0, le=65535, description=(
        "The metrics port: /metrics served by a small process of its own (the standard library only, ~10 MB) "
        "from the collector's latest render, so a scrape never waits on a poll. Unset: api.port + 1 (if that "
        "port is taken, a warning and /metrics on the API port only); 0: no metrics port. /metrics stays on "
        "the API port as well, with the same read token."))

    @field_validator("cluster_label")
    @classmethod
    def _cluster_label(cls, value: str) -> str:
        if value and (not _LABEL.match(value) or value in _EXPORTER_LABELS):
            raise ValueError(f"{value!r} is not a usable label name")
        return value


_TOKEN = re.compile(r"^[\x21-\x7e]+$")
TRUST_ALL = "*"


def token_problem(token: SecretStr, otherwise: str = "remove the key to run without one") -> str | None:
    """Why a token cannot guard anything, in one sentence (never quoting it); None if it can.

    Fail closed: an empty value (an empty key in an existing Secret) would match a request that sends no
    token at all.  Only visible ASCII: a bearer token travels in an HTTP header, whose bytes servers and
    clients decode as latin-1 while a form or the config holds UTF-8, so anything else is compared as
    different bytes on different paths and locks everyone out (RFC 6750's token68 is a subset of this).
    """
    value = token.get_secret_value()
    if not value.strip():
        return f"is empty or blank: set a token, or {otherwise}"
    if value != value.strip():
        return ("starts or ends with whitespace (a Secret made with `echo` ends with a newline; use "
                "`printf %s` or `kubectl create secret --from-literal`)")
    if not _TOKEN.match(value):
        return "must be visible ASCII only (letters, digits, punctuation; no spaces or other characters)"
    return None


def _trusted_proxy(entry: str) -> str:
    if entry == TRUST_ALL:
        return entry
    try:
        ipaddress.ip_network(entry, strict=False)
    except ValueError:
        raise ValueError(f"{entry!r} is not an IP address, a network (10.0.0.0/8) or '*'") from None
    return entry


class ApiConfig(_Strict):
    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=1, le=65535)
    read_token: SecretStr | None = Field(default=None, description="If set, read endpoints need 'Authorization: Bearer <token>'.")
    admin_enabled: bool = Field(default=False, description="Enables the abort endpoint (WriteTxnMarkers).")
    admin_token: SecretStr | None = None
    trusted_proxies: list[str] = Field(default_factory=lambda: ["127.0.0.1", "::1"], description=(
        "Addresses or networks (10.0.0.0/8) of the reverse proxies in front of txnwatch (an Ingress controller): "
        "only their X-Forwarded-For and X-Forwarded-Proto are believed, for the client address failed logins "
        "are counted against and for the console cookie's Secure flag. '*' trusts every peer (then any "
        "client can claim any address)."))
    auth_failures_per_window: int = Field(default=10, ge=1, le=100_000, description=(
        "Failed authentications (a wrong read token, login or admin token) one client may make per "
        "auth_failure_window_seconds before its requests are answered 429 until the window ends."))
    auth_failure_window_seconds: float = Field(default=60, ge=1, le=86_400)
    workers: int = Field(default=0, ge=0, le=32, description=(
        "0: the API and /metrics are served by the daemon's own process (the lean default). N >= 1: by N worker "
        "processes of their own on the same port, so scrapes and requests never wait on a poll; each worker "
        "adds ~85 MB (see docs/performance.md)."))
    answer_cache_bytes: int = Field(default=8 * 1024 * 1024, ge=0, le=1024 * 1024 * 1024, description=(
        "Memory per serving process for answers of the list endpoints, kept until the next poll publishes "
        "(LRU; 0: no cache). Filled only by requests, so an idle daemon does not pay for it."))
    answer_cache_max_age_seconds: float = Field(default=1.0, gt=0, le=60, description=(
        "A cached list answer is also recomputed after this long: its age fields, what a transaction-log "
        "tail wrote since and the pipeline's reports are never older than this."))
    max_connections: int = Field(default=1000, ge=1, le=1_000_000, description=(
        "Open HTTP connections per serving process. At the cap, the connection that waited longest without a "
        "request in progress is closed for the new one, so probes and scrapes get in during a flood of idle "
        "connections. Lowered automatically to leave 256 file descriptors (a quarter of a smaller limit) for "
        "the rest when the open-file limit (raised to its hard limit at start) is small."))
    read_timeout_seconds: float = Field(default=10, gt=0, le=3600, description=(
        "A request's head and body must arrive within this many seconds of the connection opening (or of the "
        "request's first byte on a kept-alive connection); slower ones are closed (slowloris)."))
    keep_alive_timeout_seconds: float = Field(default=5, gt=0, le=3600, description=(
        "How long a connection may wait idle for its next request after a response. Behind a load balancer "
        "that reuses connections, set it above the balancer's idle timeout (AWS ALB: 60 s)."))
    max_request_head_bytes: int = Field(default=16 * 1024, ge=1024, le=1024 * 1024, description=(
        "A request's head (request line and header fields) must end within this many bytes, on the API port, "
        "the console and the metrics port; longer ones are answered 431 and closed before more is read."))
    max_request_header_fields: int = Field(default=100, ge=8, le=10_000, description=(
        "Header fields one request may carry; more are answered 431 and the connection closed."))
    max_url_bytes: int = Field(default=8 * 1024, ge=256, le=1024 * 1024, description=(
        "Longest request URL (path and query); longer ones are answered 414 and the connection closed."))

    @field_validator("read_token")
    @classmethod
    def _read_token(cls, value: SecretStr | None) -> SecretStr | None:
        problem = None if value is None else token_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("admin_token")
    @classmethod
    def _admin_token(cls, value: SecretStr | None, info: ValidationInfo) -> SecretStr | None:
        problem = (None if value is None or not info.data.get("admin_enabled")
                   else token_problem(value, "set admin_enabled: false"))
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("trusted_proxies", mode="before")
    @classmethod
    def _split_proxies(cls, value: Any) -> Any:
        if isinstance(value, str):  # TXNWATCH_API__TRUSTED_PROXIES=10.0.0.0/8,127.0.0.1 as uvicorn spells it
            value = [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("trusted_proxies")
    @classmethod
    def _proxies(cls, value: list[str]) -> list[str]:
        return [_trusted_proxy(entry) for entry in value]

    @model_validator(mode="after")
    def _admin(self) -> ApiConfig:
        if self.admin_enabled and self.admin_token is None:
            raise ValueError("admin_enabled needs admin_token")
        return self


#: The longest ``console.session_lifetime_seconds``: 7 days.
SESSION_LIFETIME_MAX_S = 7 * 86400


class ConsoleConfig(_Strict):
    """The built-in web console at /console (served with the API, behind the same read token)."""

    enabled: bool = True
    grafana_url: str | None = Field(default=None, pattern=r"^https?://", description=(
        "Base URL of the Grafana that has the shipped dashboards; the console links its panels when set."))
    runbook_url: str | None = Field(default=None, pattern=r"^https?://", description=(
        "Where on-call reads docs/runbooks.md (e.g. your git host's rendered file); the console's own copy "
        "at /console/runbooks when unset."))
    cli_command: str = Field(default="txnwatch", min_length=1, max_length=300, pattern=r"^[^\n\r]+$", description=(
        "How on-call runs txnwatch's CLI where they paste the console's abort line (`<cli_command> abort "
        "--bootstrap-server … --execute`): `txnwatch` wherever it is installed; `txnwatch demo` sets the "
        "path of its own virtualenv's script, so its line runs as printed."))
    session_lifetime_seconds: int = Field(default=12 * 3600, gt=0, le=SESSION_LIFETIME_MAX_S, description=(
        "How long a console sign-in lasts (default 12 h), at most 7 days: a longer one is a standing credential. "
        "A session ends earlier at its Sign out, or when every session is ended (`txnwatch sessions end`, POST "
        "/api/v1/admin/console-sessions/end); lowering it ends sessions older than the new lifetime."))


class PagerDutyConfig(_Strict):
    enabled: bool = False
    routing_key: SecretStr | None = None
    events_url: str = "https://events.pagerduty.com/v2/enqueue"
    source: str = "txnwatch"
    timeout_seconds: float = Field(default=10, gt=0, le=120)
    max_attempts: int = Field(default=20, ge=1)

    @model_validator(mode="after")
    def _key(self) -> PagerDutyConfig:
        if self.enabled and self.routing_key is None:
            raise ValueError("enabled needs routing_key (or TXNWATCH_PAGERDUTY__ROUTING_KEY)")
        return self


class WebhookConfig(_Strict):
    """A notifier beside PagerDuty: a generic JSON webhook or a Slack incoming webhook (same outbox, own retries)."""

    enabled: bool = False
    url: SecretStr | None = Field(default=None, description="The webhook URL; it embeds its credential, so it is "
                                                            "a secret (e.g. TXNWATCH_NOTIFIERS__SLACK__URL).")
    timeout_seconds: float = Field(default=10, gt=0, le=120)

    @model_validator(mode="after")
    def _url(self) -> WebhookConfig:
        if self.enabled and (self.url is None or not self.url.get_secret_value().startswith(("http://", "https://"))):
            raise ValueError("enabled needs url (http:// or https://)")
        return self


class NotifiersConfig(_Strict):
    webhook: WebhookConfig = Field(default_factory=WebhookConfig)
    slack: WebhookConfig = Field(default_factory=WebhookConfig)


class AlertRuleConfig(_Strict):
    """One built-in alert rule; `for_seconds` is Prometheus' `for:`."""

    enabled: bool = True
    for_seconds: float = Field(default=0, ge=0)
    severity: Severity = Severity.CRITICAL
    labels: dict[str, str] = Field(default_factory=dict)


class FleetConfig(_Strict):
    """Per-cluster leases when several replicas share one PostgreSQL (docs/fleet.md). SQLite ignores this."""

    lease_seconds: float = Field(default=15, ge=2, le=600, description="How long a cluster's lease lasts without renewal: a dead replica's clusters move after at most this (plus one renew interval).")
    renew_seconds: float = Field(default=5, ge=0.2, le=120, description="How often a replica renews its leases, sends its heartbeat and rebalances.")
    margin_seconds: float = Field(default=3, gt=0, le=120, description="A holder that could not renew stops polling and paging this long before its lease's deadline, so it is silent before anyone else may take over.")
    replica_id: str | None = Field(default=None, max_length=100, description="Name in the lease tables; default host-pid-random.")

    @model_validator(mode="after")
    def _timing(self) -> FleetConfig:
        if self.lease_seconds <= self.renew_seconds + self.margin_seconds:
            raise ValueError(f"lease_seconds ({self.lease_seconds:g}) must exceed renew_seconds + margin_seconds "
                             f"({self.renew_seconds + self.margin_seconds:g}), or a healthy holder would drop its "
                             "leases between two renewals")
        return self


class RetentionConfig(_Strict):
    days: float = Field(default=14, gt=0)
    archive_dir: str = Field(default="./var/archive", description="Parquet history archive: a local path or a Hadoop filesystem URI.")
    archive_days: float | None = Field(default=None, gt=0, description="Archive retention: date partitions older "
                                       "than this are removed from the Parquet archive; unset keeps them.")
    downsample_after_hours: float = Field(default=1, gt=0, le=24 * 366, description=(
        "Partition offsets and lag samples older than this are thinned to one per downsample_minutes (the archive "
        "keeps them all); the latest state is never thinned."))
    downsample_minutes: float = Field(default=60, ge=0, le=1440, description=(
        "The window of the thinning: per partition its first offset sample of each window and the first sample "
        "of each pinned LSO stay, and the first lag sample of each window; 0 keeps every sample. See "
        "docs/performance.md (Storage per day)."))


class TransactionLogConfig(_Strict):
    """Tailing ``__transaction_state`` for exact coordinator history (needs Describe + Read on the topic)."""

    enabled: bool = Field(default=True, description="Tail the transaction log; off means polling only.")
    start_from: Literal["beginning", "end"] = Field(
        default="beginning", description="Where a cluster's first tail starts when no position is stored yet; "
        "later starts always resume at the stored positions.")
    retry_seconds: float = Field(default=30, ge=1, le=3600, description="How soon an unreadable log is tried again.")
    busy_commit_ms: int = Field(
        default=250, ge=20, le=1000, description="While the log keeps bringing records (250 or more waiting), what was read "
        "is committed this long after the first of it, once the previous commit has landed (at the latest after a "
        "second; a trickle that never drains commits once a second): a "
        "busy log's records are stored within about this plus one commit. Lower: fresher history for more "
        "commits (each costs CPU); 1000: one commit a second. A quiet log commits whenever it is drained.")
    fetch_wait_ms: int = Field(
        default=2000, ge=100, le=10_000, description="How long a broker holds the tail's fetch while fewer than 64 KiB "
        "of new records wait: what a trickle of records waits before the tail reads it (then it is committed). A "
        "quiet log costs CPU per fetch round, not per record (one round per broker per wait): lower for fresher "
        "history of a quiet log at more CPU (1000 about doubles the tail's idle CPU). A busy log fills 64 KiB long "
        "before, so it is read as it comes; while reads fill a whole poll (catching up) the tail asks for 100 ms "
        "instead. Capped at half of the cluster's request_timeout_ms.")
    hot_transitions_minutes: float = Field(
        default=60, gt=0, description="How long the full transition stream stays in the database after it was "
        "archived to Parquet (anomalies, per-id state and aggregates stay for retention.days).")


class Settings(BaseSettings):
    """Everything txnwatch can be told. See config/example.yaml for a documented file."""

    model_config = SettingsConfigDict(
        env_prefix="TXNWATCH_",
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
    )

    database_url: str = "sqlite:///./var/txnwatch.db"
    clusters: list[ClusterConfig] = Field(default_factory=list)
    poll_interval_seconds: float = Field(default=15, ge=1, le=3600)
    lag_sample_interval_seconds: float = Field(default=300, ge=0, le=86_400, description=(
        "How often a cluster's consumer lag is written to the database (its history: the console's group chart, "
        "incident context, the pipeline's lag rollups): once per interval, aligned to the clock; 0 writes "
        "every poll. Current lag (/metrics, the API's and the console's consumer groups) always comes from the "
        "latest poll. See docs/performance.md for the sizing rule."))
    offset_sample_interval_seconds: float = Field(default=300, ge=0, le=86_400, description=(
        "Partition offsets are written to the database when a poll finds them changed (any partition's offsets, "
        "leader or open transactions, or the set of partitions), and at least once per this interval, aligned to "
        "the clock; 0 writes every poll. The newest written offsets always equal the latest poll's. See "
        "docs/performance.md for the sizing rule."))
    detection: DetectionConfig = Field(default_factory=DetectionConfig)
    api: ApiConfig = Field(default_factory=ApiConfig)
    console: ConsoleConfig = Field(default_factory=ConsoleConfig)
    pagerduty: PagerDutyConfig = Field(default_factory=PagerDutyConfig)
    notifiers: NotifiersConfig = Field(default_factory=NotifiersConfig)
    public_url: str | None = Field(default=None, pattern=r"^https?://", description=(
        "Where operators reach this txnwatch (its Ingress or Service URL). Pages link to it (PagerDuty client_url) "
        "and to its console's runbooks; unset, pages carry no client link (never the listen address)."))
    alert_rules: dict[str, AlertRuleConfig] = Field(default_factory=dict)
    retention: RetentionConfig = Field(default_factory=RetentionConfig)
    fleet: FleetConfig = Field(default_factory=FleetConfig)
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    transaction_log: TransactionLogConfig = Field(default_factory=TransactionLogConfig)
    log_format: Literal["text", "json"] = Field(default="text", description=(
        "text (asctime level logger: message) or json (one object per line). Either way a record is one line: "
        "control characters in its message and arguments (newlines, ESC, C1, Unicode line separators, bidi "
        "controls) are escaped as JSON escapes them, so a tenant's id cannot forge a record or drive a terminal."))
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"

    @field_validator("database_url")
    @classmethod
    def _db_url(cls, value: str) -> str:
        """``postgres://`` is the spelling Heroku, libpq and most hosted PostgreSQL consoles hand out; SQLAlchemy
        refuses it, so it is read as ``postgresql://`` here, once, and nothing downstream sees the alias."""
        scheme = value.split(":", 1)[0] if "://" in value else ""
        if scheme not in SUPPORTED_DB_SCHEMES:
            if not scheme:
                raise ValueError("not a URL: expected scheme://..., e.g. sqlite:///./var/txnwatch.db or "
                                 "postgresql://txnwatch@db:5432/txnwatch")
            raise ValueError(f"scheme {scheme!r} is not supported; use one of {', '.join(SUPPORTED_DB_SCHEMES)}")
        if scheme == "postgres":
            value = "postgresql" + value.removeprefix("postgres")
        return value

    @field_validator("clusters")
    @classmethod
    def _unique_clusters(cls, value: list[ClusterConfig]) -> list[ClusterConfig]:
        names = [c.name for c in value]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"duplicate cluster names: {', '.join(dupes)}")
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The YAML file arrives through init_settings (see load_settings), so the
        # environment must come first to override it.
        return env_settings, init_settings, file_secret_settings

    def interval_for(self, cluster: ClusterConfig) -> float:
        return cluster.poll_interval_seconds or self.poll_interval_seconds

    def lag_sample_interval_for(self, cluster: ClusterConfig) -> float:
        own = cluster.lag_sample_interval_seconds
        return self.lag_sample_interval_seconds if own is None else own

    def offset_sample_interval_for(self, cluster: ClusterConfig) -> float:
        own = cluster.offset_sample_interval_seconds
        return self.offset_sample_interval_seconds if own is None else own


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config file: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise ConfigError(f"{path}: not valid YAML{where}: {getattr(exc, 'problem', exc)}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of option: value")
    return data


_SECRET_WORDS = ("password", "token", "secret", "key", "credential")


def _origin(loc: tuple[Any, ...], file_origin: str, environ: dict[str, str]) -> str:
    """Where a value came from: the most specific ``TXNWATCH_*`` variable that sets it, else the file."""
    names = [str(part) for part in loc if not isinstance(part, int)]
    for depth in range(len(names), 0, -1):
        var = "TXNWATCH_" + "__".join(names[:depth]).upper()
        if var in environ:
            return f"environment {var}"
    return file_origin


def _model_at(loc: tuple[Any, ...]) -> Any:
    """The pydantic model class a location points into (for listing the options allowed there)."""
    model: Any = Settings
    for part in loc:
        if isinstance(part, int) or not (isinstance(model, type) and issubclass(model, BaseModel)):
            continue
        field = model.model_fields.get(part)
        if field is None:
            return None
        model = field.annotation
        while get_origin(model) in (list, dict, Union, UnionType):
            model = next((a for a in reversed(get_args(model)) if a is not type(None)), None)
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _echoable(key: str, value: Any) -> bool:
    """Whether a wrong value may be shown back: never a secret's, nor a URL's that has no scheme (ConfigError
    masks passwords in ``scheme://user:password@`` but cannot tell one in ``user:password@host``)."""
    if isinstance(value, (dict, list)) or any(word in key.lower() for word in _SECRET_WORDS):
        return False
    return not (key.endswith("url") and isinstance(value, str) and "@" in value and "://" not in value)


def _describe_one(error: Any, file_origin: str, environ: dict[str, str]) -> str:
    loc = tuple(error["loc"])
    key = ".".join(str(part) for part in loc) or "(top level)"
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        model = _model_at(loc[:-1])
        options = sorted(model.model_fields) if model else []
        close = difflib.get_close_matches(str(loc[-1]), options, n=1)
        message = "unknown option" + (f"; did you mean {close[0]!r}?" if close else
                                      f"; allowed here: {', '.join(options)}" if options else "")
    elif error["type"] == "missing":
        message = "required, but not given"
    elif "input" in error and _echoable(key, error["input"]) and repr(error["input"]) not in message:
        message = f"{message} (got {error['input']!r})"
    return f"{_origin(loc, file_origin, environ)}: {key}: {message}"


def _describe(error: ValidationError, origin: str, environ: dict[str, str] | None = None) -> list[str]:
    env = {k.upper(): v for k, v in (os.environ if environ is None else environ).items()}
    return [_describe_one(e, origin, env) for e in error.errors()]


def _malformed_env_json() -> tuple[list[str], list[str]]:
    """``TXNWATCH_*`` variables holding structured options (lists, mappings) that are not valid JSON.

    pydantic-settings would stop at the first with a traceback; here each becomes one line, and the
    rest of the configuration is still checked without them.
    """
    problems, names = [], []
    for name, value in os.environ.items():
        upper = name.upper()
        if not upper.startswith("TXNWATCH_") or "__" in upper:
            continue
        field = Settings.model_fields.get(upper.removeprefix("TXNWATCH_").lower())
        if field is None:
            continue
        default = field.get_default(call_default_factory=True)
        if not isinstance(default, (list, dict, BaseModel)):
            continue
        try:
            json.loads(value)
        except ValueError as exc:
            shape = "a JSON list" if isinstance(default, list) else "a JSON object"
            example = (' e.g. [{"name": "prod", "bootstrap_servers": "kafka:9092"}]'
                       if upper == "TXNWATCH_CLUSTERS" else "")
            problems.append(f"environment {upper}: {upper.removeprefix('TXNWATCH_').lower()}: not valid JSON "
                            f"({exc}); expected {shape}{example}")
            names.append(name)
    return problems, names


def load_settings(path: Path | str | None = None, **overrides: Any) -> Settings:
    """Load and validate settings; the only way the rest of txnwatch gets configuration.

    ``path`` falls back to ``$TXNWATCH_CONFIG``; without either, defaults and the
    environment apply.  Raises ConfigError with one line for the operator.
    """
    if path is None and os.environ.get(CONFIG_ENV):
        path = os.environ[CONFIG_ENV]
    data: dict[str, Any] = {}
    origin = "configuration"
    if path is not None:
        path = Path(path)
        data = _read_yaml(path)
        origin = str(path)
    data.update(overrides)
    problems, malformed = _malformed_env_json()
    saved = {name: os.environ.pop(name) for name in malformed}
    try:
        settings = Settings(**data)
    except ValidationError as exc:
        problems += _describe(exc, origin)
    except SettingsError as exc:  # a TXNWATCH_* value pydantic-settings cannot decode at all
        problems.append(f"environment: {str(exc).splitlines()[0]}")
    finally:
        os.environ.update(saved)
    if problems:
        raise ConfigError(*problems)
    return settings
