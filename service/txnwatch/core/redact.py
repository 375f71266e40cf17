"""Credentials out of anything txnwatch shows: URLs keep their user and lose their password (``user:***@``).

Why one helper, applied where text leaves the process (config errors, ``config check``, log
lines, ``/api/v1`` bodies, console pages) rather than once where a URL is read: a password
reaches text by many roads: a database URL echoed by a validation error, a driver's
exception quoting its DSN, an exporter URL in a verification report, an error string stored
and shown later. ``user:***@`` keeps what an operator needs to tell two URLs apart (the
scheme, the user, the host) and nothing that lets anyone log in. The same spelling as
SQLAlchemy's ``URL.render_as_string(hide_password=True)`` and the libpq tools.
"""

from __future__ import annotations

import re

MASK = "***"

# scheme://user:password@host  The password may hold anything but whitespace and quotes, '@' and '/' included
# (they should be percent-encoded, yet operators paste them raw): the last '@' followed by a host and the end of
# the authority closes it, so a pasted password is masked whole rather than cut where a URL parser would cut it.
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<user>[^:@/\s'\"]*):(?P<password>[^\s'\"]*)@"
                       r"(?=[^@/\s'\"]*(?:[/\s'\"?#),;]|$))")
# libpq keyword strings, as psycopg quotes them in some errors: password=secret or password='se cret'
_KEYWORD = re.compile(r"(?P<key>\bpassword\s*=\s*)(?P<value>'(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


def redact(text: str) -> str:
    """``text`` with every URL password replaced by ``***`` (user and host kept), and libpq ``password=``."""
    if "@" not in text and "password" not in text.lower():
        return text
    text = _USERINFO.sub(lambda m: f"{m['scheme']}{m['user']}:{MASK}@", text)
    return _KEYWORD.sub(lambda m: f"{m['key']}{MASK}", text)


def redact_optional(text: str | None) -> str | None:
    return None if text is None else redact(text)
