"""How to reach one cluster and which of its topics to watch.

A frozen dataclass rather than the pydantic ``ClusterConfig`` so that the Kafka layer
can be used (and tested) without the service's configuration machinery, and so that
a connection can never see its settings change underneath it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal

from txnwatch.core.idpattern import compile_name_filter, compile_pattern
from txnwatch.kafka.bounded import MAX_RESPONSE_BYTES, MAX_RESPONSE_ENTRIES, ResponseBounds
from txnwatch.kafka.kerberos import KerberosIdentity
from txnwatch.kafka.msk import MskIamSigner
from txnwatch.kafka.oauth import OAuthSettings, OidcTokenProvider

if TYPE_CHECKING:
    from txnwatch.core.config import ClusterConfig

SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI", "AWS_MSK_IAM"]
#: Mechanisms that log in with sasl_username/sasl_password.
PASSWORD_MECHANISMS = frozenset({"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"})


@dataclass(frozen=True)
class ClusterConnectionSettings:
    """Connection, topic-selection and group-selection settings for one cluster.

    Topic patterns use full-match semantics, as Kafka's own tools do: ``orders`` watches
    the topic ``orders`` only, ``orders\\..*`` watches its namespace.  With no include
    pattern every topic is watched; internal topics (``__consumer_offsets``,
    ``__transaction_state``) never are, because their producers are the brokers.  Group
    patterns work the same way, on group ids.
    """

    name: str
    bootstrap_servers: tuple[str, ...]
    security_protocol: SecurityProtocol = "PLAINTEXT"
    sasl_mechanism: SaslMechanism | None = None
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_check_hostname: bool = True
    request_timeout_ms: int = 10_000
    #: Largest response frame read, and most entries decoded from one answer (txnwatch.kafka.bounded).
    max_response_bytes: int = MAX_RESPONSE_BYTES
    max_response_entries: int = MAX_RESPONSE_ENTRIES
    #: Bootstrap (TCP, TLS, SASL, first metadata) must finish within this, else the cluster is unreachable.
    connect_timeout_ms: int = 5_000
    topics_include: tuple[str, ...] = ()
    topics_exclude: tuple[str, ...] = ()
    #: Consumer groups whose offsets are fetched: full-match patterns, as for topics (exclude wins).
    groups_include: tuple[str, ...] = ()
    groups_exclude: tuple[str, ...] = ()
    #: Transactional ids kept (whole-id match, core/idpattern.py): sent to Kafka 4.1+ in ListTransactions v2,
    #: applied to the listing here as well, so every broker version yields the same ids.
    transactional_id_pattern: str | None = None
    client_id: str = "txnwatch"
    #: Lagging group partitions whose first unconsumed record is fetched per poll, for time lag (0: none).
    record_fetch_limit: int = 200
    #: OAUTHBEARER: the OIDC client-credentials grant (see txnwatch.kafka.oauth).
    oauth: OAuthSettings | None = None
    #: GSSAPI: the broker's Kerberos service name and, if not the broker's host name, its domain; txnwatch's
    #: own principal and the keytab holding its key (txnwatch.kafka.kerberos).  Without a keytab the ticket
    #: comes from the credential cache (KRB5CCNAME); without a principal, from the process's defaults.
    sasl_kerberos_service_name: str = "kafka"
    sasl_kerberos_domain_name: str | None = None
    sasl_kerberos_principal: str | None = None
    sasl_kerberos_keytab: str | None = None
    #: AWS_MSK_IAM: region (else the broker host name's, else the AWS config chain) and named profile.
    aws_region: str | None = None
    aws_profile: str | None = None
    #: (broker label, JMX exporter URL) pairs and a per-broker URL template ({host}, {node_id}): where the
    #: brokers' own KIP-890 verification figures are read (kafka/broker_metrics.py).
    broker_metrics_urls: tuple[tuple[str, str], ...] = ()
    broker_metrics_url_template: str | None = None
    broker_metrics_timeout_ms: int = 2_000

    @property
    def reads_broker_metrics(self) -> bool:
        return bool(self.broker_metrics_urls or self.broker_metrics_url_template)

    def __post_init__(self) -> None:
        if isinstance(self.bootstrap_servers, str):
            object.__setattr__(self, "bootstrap_servers", tuple(
                s.strip() for s in self.bootstrap_servers.split(",") if s.strip()))
        if not self.bootstrap_servers:
            raise ValueError(f"cluster {self.name!r}: bootstrap_servers is empty")
        if self.connect_timeout_ms <= 0:
            raise ValueError(f"cluster {self.name!r}: connect_timeout_ms must be positive")
        if self.request_timeout_ms <= 0:
            raise ValueError(f"cluster {self.name!r}: request_timeout_ms must be positive")
        uses_sasl = self.security_protocol.startswith("SASL_")
        if uses_sasl and self.sasl_mechanism is None:
            raise ValueError(f"cluster {self.name!r}: {self.security_protocol} needs sasl_mechanism")
        if self.sasl_mechanism is not None and not uses_sasl:
            raise ValueError(f"cluster {self.name!r}: sasl_mechanism needs a SASL_* security_protocol")
        if self.sasl_mechanism == "OAUTHBEARER" and self.oauth is None:
            raise ValueError(f"cluster {self.name!r}: OAUTHBEARER needs the OAuth token endpoint settings")
        if self.sasl_mechanism == "AWS_MSK_IAM" and self.security_protocol != "SASL_SSL":
            raise ValueError(f"cluster {self.name!r}: AWS_MSK_IAM needs security_protocol SASL_SSL")
        # Compile now so a bad pattern fails at configuration time, not mid-poll.
        _ = self._topics, self._groups, self._id_pattern

    @cached_property
    def _topics(self) -> _Selection:
        return _Selection.compile(self.topics_include, self.topics_exclude)

    @cached_property
    def _groups(self) -> _Selection:
        return _Selection.compile(self.groups_include, self.groups_exclude)

    @cached_property
    def _id_pattern(self) -> re.Pattern[str] | None:
        return None if self.transactional_id_pattern is None else compile_pattern(self.transactional_id_pattern)

    def lists_transaction(self, transactional_id: str) -> bool:
        """Whether the id is in this cluster's scope (``transactional_id_pattern``, whole-id match)."""
        pattern = self._id_pattern
        return pattern is None or pattern.fullmatch(transactional_id) is not None

    def watches(self, topic: str, *, internal: bool = False) -> bool:
        return not internal and self._topics.selects(topic)

    def watches_group(self, group_id: str) -> bool:
        """Whether the group's offsets are fetched (and so its lag has series, rows and API rows)."""
        return self._groups.selects(group_id)

    @cached_property
    def sasl_provider(self) -> OidcTokenProvider | MskIamSigner | KerberosIdentity | None:
        """One token provider (MSK signer, Kerberos identity) per cluster, shared by all its connections so
        tokens and tickets are reused."""
        if self.sasl_mechanism == "OAUTHBEARER" and self.oauth is not None:
            return OidcTokenProvider(self.oauth)
        if self.sasl_mechanism == "AWS_MSK_IAM":
            return MskIamSigner(region=self.aws_region, profile=self.aws_profile)
        if self.sasl_mechanism == "GSSAPI":
            return KerberosIdentity(principal=self.sasl_kerberos_principal, keytab=self.sasl_kerberos_keytab)
        return None

    @property
    def response_bounds(self) -> ResponseBounds:
        return ResponseBounds(self.max_response_bytes, self.max_response_entries)

    def client_config(self) -> dict[str, Any]:
        """Keyword arguments for kafka-python's connection manager."""
        config: dict[str, Any] = {
            "bootstrap_servers": list(self.bootstrap_servers),
            "client_id": self.client_id,
            "request_timeout_ms": self.request_timeout_ms,
            "socket_connection_setup_timeout_ms": min(self.connect_timeout_ms, self.request_timeout_ms),
            "socket_connection_setup_timeout_max_ms": max(self.connect_timeout_ms, self.request_timeout_ms),
            # Bounded so a recovered broker is noticed within a poll interval or two.
            "reconnect_backoff_max_ms": 5_000,
            # One poll pipelines up to seven requests to a broker in a single round trip.
            "max_in_flight_requests_per_connection": 16,
            # The connection manager's own default (1 MB) refuses the answers of a big cluster: the Metadata
            # answer of 80,000 partitions is 2.1 MB, and no poll got past its first round (benchmarks/poll.py --daemon).
            # Ours, checked as each frame's size arrives (txnwatch.kafka.bounded), is the same figure.
            "receive_message_max_bytes": self.max_response_bytes,
            "security_protocol": self.security_protocol,
            "sasl_mechanism": self.sasl_mechanism,
            "sasl_plain_username": self.sasl_username,
            "sasl_plain_password": self.sasl_password,
            "ssl_cafile": self.ssl_cafile,
            "ssl_certfile": self.ssl_certfile,
            "ssl_keyfile": self.ssl_keyfile,
            "ssl_check_hostname": self.ssl_check_hostname,
            # kafka-python passes this object to every mechanism; OAUTHBEARER, AWS_MSK_IAM (kafka.msk) and GSSAPI
            # (kafka.kerberos) read it.
            "sasl_oauth_token_provider": self.sasl_provider,
            "sasl_kerberos_service_name": self.sasl_kerberos_service_name,
            "sasl_kerberos_domain_name": self.sasl_kerberos_domain_name,
        }
        return config

    @classmethod
    def from_config(cls, config: ClusterConfig) -> ClusterConnectionSettings:
        password = config.sasl_password.get_secret_value() if config.sasl_password else None
        return cls(
            name=config.name,
            bootstrap_servers=tuple(config.bootstrap_servers),
            security_protocol=config.security_protocol,
            sasl_mechanism=config.sasl_mechanism,
            sasl_username=config.sasl_username,
            sasl_password=password,
            ssl_cafile=str(config.ssl_cafile) if config.ssl_cafile else None,
            ssl_certfile=str(config.ssl_certfile) if config.ssl_certfile else None,
            ssl_keyfile=str(config.ssl_keyfile) if config.ssl_keyfile else None,
            ssl_check_hostname=config.ssl_check_hostname,
            request_timeout_ms=config.request_timeout_ms,
            connect_timeout_ms=config.connect_timeout_ms,
            max_response_bytes=config.max_response_bytes,
            max_response_entries=config.max_response_entries,
            topics_include=tuple(config.topics_include),
            topics_exclude=tuple(config.topics_exclude),
            groups_include=tuple(config.groups_include),
            transactional_id_pattern=config.transactional_id_pattern,
            groups_exclude=tuple(config.groups_exclude),
            oauth=_oauth(config),
            record_fetch_limit=config.time_lag_fetches_per_poll,
            sasl_kerberos_service_name=config.sasl_kerberos_service_name,
            sasl_kerberos_domain_name=config.sasl_kerberos_domain_name,
            sasl_kerberos_principal=config.sasl_kerberos_principal,
            sasl_kerberos_keytab=str(config.sasl_kerberos_keytab) if config.sasl_kerberos_keytab else None,
            aws_region=config.aws_region,
            aws_profile=config.aws_profile,
            broker_metrics_urls=tuple(sorted(config.broker_metrics_urls.items())),
            broker_metrics_url_template=config.broker_metrics_url_template,
            broker_metrics_timeout_ms=config.broker_metrics_timeout_ms,
        )


@dataclass(frozen=True)
class _Selection:
    """Include and exclude patterns, compiled once; exclude wins."""

    include: tuple[re.Pattern[str], ...]
    exclude: tuple[re.Pattern[str], ...]

    @classmethod
    def compile(cls, include: tuple[str, ...], exclude: tuple[str, ...]) -> _Selection:
        return cls(tuple(compile_name_filter(p) for p in include), tuple(compile_name_filter(p) for p in exclude))

    def selects(self, name: str) -> bool:
        """Full-match semantics over every character: a pattern must match the whole name, so ``orders`` is one
        name, not a prefix, and ``.*`` is every name, one holding a newline included."""
        if self.include and not any(p.fullmatch(name) for p in self.include):
            return False
        return not any(p.fullmatch(name) for p in self.exclude)


def _oauth(config: ClusterConfig) -> OAuthSettings | None:
    if config.sasl_mechanism != "OAUTHBEARER" or config.sasl_oauth_token_endpoint_url is None:
        return None
    secret = config.sasl_oauth_client_secret
    return OAuthSettings(
        token_endpoint_url=config.sasl_oauth_token_endpoint_url,
        client_id=config.sasl_oauth_client_id or "",
        client_secret=secret.get_secret_value() if secret is not None else None,
        client_secret_file=str(config.sasl_oauth_client_secret_file) if config.sasl_oauth_client_secret_file else None,
        client_secret_env=config.sasl_oauth_client_secret_env,
        scope=config.sasl_oauth_scope,
        ca_file=str(config.sasl_oauth_ca_file) if config.sasl_oauth_ca_file else None,
        extensions=dict(config.sasl_oauth_extensions),
        timeout_s=config.request_timeout_ms / 1000,
    )
