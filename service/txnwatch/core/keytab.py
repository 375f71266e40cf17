"""What a Kerberos client identity must look like: a principal with its realm, a keytab that can be read.

Shared by the configuration (``txnwatch config check`` refuses a bad one in one line, at start) and by the GSSAPI
login (``txnwatch.kafka.kerberos``), which tells a keytab that went missing or bad since the start from one that
holds no key for the principal: MIT's library reports both as "No credentials cache found".
"""

from __future__ import annotations

from pathlib import Path

#: The first bytes of an MIT/Heimdal keytab file: format 5, version 2 (what kadmin and ktutil write) or 1.
KEYTAB_MAGIC = (b"\x05\x02", b"\x05\x01")


def principal_problem(principal: str) -> str | None:
    """Why ``principal`` is not a Kerberos principal with its realm (name[/instance]@REALM); None if it is.

    The realm is required: without it MIT takes krb5.conf's default_realm, and a daemon watching clusters of
    two realms would log in to one of them as a principal that realm does not have, with an error naming
    neither."""
    name, at, realm = principal.rpartition("@")
    if not at:
        return (f"{principal!r} has no realm: write it as {principal}@REALM (the realm as the KDC names it, "
                "usually in capitals)")
    if not name or not realm or any(ch.isspace() for ch in principal):
        return f"{principal!r} is not name@REALM"
    return None


def keytab_problem(path: Path | str) -> str | None:
    """Why ``path`` cannot serve as a keytab; None if it can (it opens and starts like one)."""
    try:
        with Path(path).open("rb") as keytab:
            head = keytab.read(2)
    except OSError as exc:
        return f"cannot read {str(path)!r}: {exc.strerror or exc}"
    if head not in KEYTAB_MAGIC:
        return f"{str(path)!r} is not a keytab (it does not start with the bytes 05 02 that kadmin and ktutil write)"
    return None
