"""Each broker's Kafka release and finalized ``transaction.version``, read from its ApiVersions answer.

A broker never names its release on the wire.  Its ApiVersions answer does carry every API's version range,
and each release line raises some: kafka-python reads the line from them
(``kafka.protocol.broker_version_data.infer_broker_version_from_api_versions``, a table up to 4.3 in 3.0.x)
and so does the daemon's connection; :data:`NEWER_LINES` adds the lines after the table, each with the API
version it first serves (taken from that release's own message definitions, ``common/message/*.json`` in its
kafka-clients jar, stable versions only).  The release read is therefore exact for every line known and means
"this line or newer" for the newest one (``BrokerRelease.newest_known``).

ApiVersions v3+ (KIP-584) also carries the finalized feature levels; ``transaction.version`` 2 is KIP-890's
second part (Kafka 4.0's default).  ``tests/kafka/test_release.py`` pins kafka-python's table (a canary) and
the lines added here.

Every poll asks each broker once (round 2, beside ListTransactions: a small answer), and the admin abort by
transactional id asks before it acts (txnwatch.kafka.terminate).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kafka.protocol.broker_version_data import infer_broker_version_from_api_versions
from kafka.protocol.metadata import ApiVersionsRequest

from txnwatch.core.model import BrokerRelease, RequestError
from txnwatch.kafka import errors
from txnwatch.kafka.batches import Call
from txnwatch.kafka.parse import Parsed

API = "ApiVersions"
TRANSACTION_VERSION_FEATURE = "transaction.version"
#: ApiVersions v3 is the first that carries finalized features (KIP-584); every broker since 2.4 serves it.
_MIN_VERSION = 3
#: Lines after kafka-python's table: (release, API key, a version that line is the first to serve).
#: 4.4: TxnOffsetCommit v6 (key 28) and DeleteGroups v3 (key 42) are stable in 4.4.0's message definitions,
#: where 4.3's broker served v5 and v2 (kafka-python's 4.3 row, copied from a 4.3 broker).
NEWER_LINES: tuple[tuple[tuple[int, int], int, int], ...] = (((4, 4), 28, 6), ((4, 4), 42, 3))


def api_versions(brokers: Iterable[int]) -> list[Call]:
    """One ApiVersions per broker (v3 or newer, negotiated as kafka-python's connection does)."""
    return [Call(API, node, ApiVersionsRequest(client_software_name="txnwatch", client_software_version="0",
                                               min_version=_MIN_VERSION)) for node in brokers]


def infer_release(ranges: Mapping[int, tuple[int, int]]) -> tuple[tuple[int, int], bool]:
    """(release line, newest known): the newest line whose API versions ``ranges`` (key -> (min, max)) carry."""
    for release, key, version in NEWER_LINES:
        if key in ranges and ranges[key][0] <= version <= ranges[key][1]:
            return release, release == newest_line()
    inferred = infer_broker_version_from_api_versions(dict(ranges))
    line = (int(inferred[0]), int(inferred[1]) if len(inferred) > 1 else 0)
    return line, line == newest_line()


def newest_line() -> tuple[int, int]:
    return max(release for release, _, _ in NEWER_LINES)


def parse_api_versions(response: Any, node_id: int) -> Parsed[BrokerRelease | None]:
    """A broker's release and finalized transaction.version; an error (and None) when it refused or garbled."""
    target = errors.broker_target(node_id)
    try:
        code = int(response.error_code)
        if code:
            return Parsed(None, (errors.from_code(API, target, code),))
        ranges = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys}
        finalized = getattr(response, "finalized_features", None) or ()
        levels = {str(f.name): int(f.max_version_level) for f in finalized}
    except (AttributeError, TypeError, ValueError) as exc:
        return Parsed(None, (errors.corrupt(API, target, f"{type(exc).__name__}: {exc}"),))
    release, newest = infer_release(ranges)
    return Parsed(BrokerRelease(node_id, release, newest, levels.get(TRANSACTION_VERSION_FEATURE)))


def releases(replies: Sequence[tuple[int, object | None, BaseException | None]]
             ) -> tuple[tuple[BrokerRelease, ...], list[RequestError]]:
    """(node, response, failure) per broker -> the releases read, in broker order, and the errors."""
    found: list[BrokerRelease] = []
    problems: list[RequestError] = []
    for node, response, failure in replies:
        if failure is not None:
            problems.append(errors.from_exception(API, errors.broker_target(node), failure))
            continue
        parsed = parse_api_versions(response, node)
        problems.extend(parsed.errors)
        if parsed.value is not None:
            found.append(parsed.value)
    return tuple(sorted(found, key=lambda r: r.node_id)), problems


def lowest(found: Iterable[BrokerRelease]) -> BrokerRelease | None:
    """The oldest broker: during a rolling upgrade, what the cluster as a whole can be trusted to do."""
    return min(found, key=lambda r: (r.release, not r.newest_known), default=None)


def label(release: tuple[int, int], newest_known: bool = False) -> str:
    return f"{release[0]}.{release[1]}" + ("+" if newest_known else "")
