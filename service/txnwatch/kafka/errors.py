"""Turning Kafka failures into data.

A poll reports what went wrong instead of raising it, so one broken broker or one
expired transactional id costs exactly the facts it covers.  Only a cluster that
answers nothing at all is an exception (:class:`ClusterUnreachable`), because then
there is no snapshot to speak of.
"""

from __future__ import annotations

import kafka.errors as Errors

from txnwatch.core.model import ClusterUnreachable, ErrorClass, RequestError
from txnwatch.kafka.error_classes import classify

__all__ = ["CORRUPT", "ClusterUnreachable", "broker_target", "corrupt", "error_class", "from_code", "from_exception"]

CORRUPT = "CORRUPT_RESPONSE"


def error_class(code: int | None) -> ErrorClass:
    """KIP-1050 class of a broker error code (:mod:`txnwatch.kafka.error_classes`); UNKNOWN without a code."""
    return ErrorClass.UNKNOWN if code is None else classify(code)[0]


def _advice(code: int | None) -> str:
    """The remediation an operator reads beside the error (cluster detail API); none for transport failures,
    whose cause is in the message."""
    return "" if code is None else classify(code)[1]


def from_code(api: str, target: str, code: int, message: str | None = None) -> RequestError:
    kind = Errors.for_code(code)
    name = kind.message or kind.__name__
    return RequestError(api=api, target=target, code=code, name=name,
                        message=message or kind.description or "", error_class=error_class(code),
                        advice=_advice(code))


def from_exception(api: str, target: str, exc: BaseException, context: str = "") -> RequestError:
    """A request that got no usable answer: connection refused, timeout, auth failure...

    Broker error exceptions keep their wire code; transport failures have none.
    """
    code = getattr(exc, "errno", None) if isinstance(exc, Errors.BrokerResponseError) else None
    name = getattr(exc, "message", None) if code is not None else None
    detail = f"{context}: {exc}" if context else str(exc)
    return RequestError(api=api, target=target, code=code, name=name or type(exc).__name__,
                        message=detail, error_class=error_class(code), advice=_advice(code))


def corrupt(api: str, target: str, detail: str) -> RequestError:
    return RequestError(api=api, target=target, code=None, name=CORRUPT, message=detail)


def broker_target(node_id: int) -> str:
    return f"broker:{node_id}"
