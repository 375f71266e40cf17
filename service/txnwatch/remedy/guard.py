"""Who may act: admin actions on (``api.admin_enabled``) and the admin token (``api.admin_token``; the CLI's
``--token`` or ``TXNWATCH_ADMIN_TOKEN``)."""

from __future__ import annotations

import hmac

from txnwatch.core.config import Settings

#: The credential an admin action was allowed by, as the audit's ``actor`` names it (after the door: ``api:``,
#: ``cli:``).  The one admin token; the CLI's ``--bootstrap-server`` door is the operator's own Kafka access.
ADMIN_TOKEN = "admin-token"
OWN_KAFKA_ACCESS = "bootstrap-server"
#: The CLI's ``sessions end``: the configured database's own credentials, which can change any row anyway.
OWN_DATABASE_ACCESS = "database"


class AdminRefused(Exception):
    """The guard said no; ``disabled`` tells 'turned off' (403) from 'wrong token' (401)."""

    def __init__(self, message: str, *, disabled: bool) -> None:
        super().__init__(message)
        self.disabled = disabled


def check_admin(settings: Settings, offered_token: bytes | str | None) -> str:
    """The credential's name for the audit row, or AdminRefused.  Constant-time comparison of bytes: the header's
    bytes as sent (the API), the command line's as UTF-8 (the CLI); an empty token never matches."""
    api = settings.api
    if not api.admin_enabled or api.admin_token is None:
        raise AdminRefused("admin actions are disabled (api.admin_enabled: false)", disabled=True)
    offered = offered_token.encode("utf-8") if isinstance(offered_token, str) else offered_token or b""
    expected = api.admin_token.get_secret_value().encode("utf-8")
    if not expected or not hmac.compare_digest(offered, expected):
        raise AdminRefused("admin token missing or wrong", disabled=False)
    return ADMIN_TOKEN
