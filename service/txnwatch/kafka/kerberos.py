"""SASL GSSAPI (Kerberos) with a per-cluster identity: principal, keytab and ticket cache of one cluster.

kafka-python's GSSAPI mechanism (``kafka.net.sasl.gssapi``) opens its security context with the process's
default credentials: whatever ``KRB5CCNAME`` and ``KRB5_CLIENT_KTNAME`` say, one principal for every cluster.
:class:`KerberosIdentity` holds one cluster's principal and keytab, and acquires that principal's credentials
from that keytab through MIT's credential-store extension (``gss_acquire_cred_from``: ``client_keytab`` and a
``MEMORY:`` ticket cache of the cluster's own), so two clusters of one daemon may log in as two principals
from two keytabs; MIT's library gets the first ticket from the keytab and a new one when it runs out, as it does
for ``KRB5_CLIENT_KTNAME``.  With a principal and no keytab the ticket comes from the credential cache
(``KRB5CCNAME``; a ``DIR:`` collection holds one cache per principal, kept fresh by ``kinit``/``k5start``);
with neither, kafka-python's behaviour: the default credentials.  ``krb5.conf`` (``KRB5_CONFIG``) is the
process's, one file that may name many realms.

As for AWS_MSK_IAM (``txnwatch.kafka.msk``), the identity travels in ``sasl_oauth_token_provider``, the one
slot of kafka-python's config that carries an object to the mechanism, and :class:`KerberosMechanism` is
registered under ``GSSAPI`` in place of kafka-python's.

kafka-python reports a failed login as a timed-out bootstrap.  The mechanism catches the GSS-API error where it
happens (getting the tickets, before a byte of the exchange is sent), phrases it as one line saying what is
wrong and what to change (:func:`explain`), and leaves it in ``last_error``, which the connection adds to its
"bootstrap failed" message (the cluster's ``last_error`` in ``/api/v1/clusters`` and the log).
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

from kafka.errors import KafkaConfigurationError
from kafka.net.sasl import register_sasl_mechanism
from kafka.net.sasl.gssapi import SaslMechanismGSSAPI

from txnwatch.core.keytab import keytab_problem

if TYPE_CHECKING:
    import gssapi

NO_BINDINGS = ("the Python package gssapi is not installed: pip install 'txnwatch[kerberos]' (it builds against the "
               "system's Kerberos libraries; Debian: libkrb5-dev)")

# MIT krb5's com_err codes (krb5/krb5.h), which GSS-API hands over as the minor status of a Kerberos failure.
_NAME_EXP = -1765328383            # KRB5KDC_ERR_NAME_EXP: Client's entry in database has expired
_C_PRINCIPAL_UNKNOWN = -1765328378  # Client '...' not found in Kerberos database
_S_PRINCIPAL_UNKNOWN = -1765328377  # Server ... not found in Kerberos database
_CLIENT_REVOKED = -1765328366      # Client's credentials have been revoked (locked out)
_KEY_EXP = -1765328361             # Password has expired
_PREAUTH_FAILED = -1765328360      # Preauthentication failed
_BAD_INTEGRITY = -1765328353       # Decrypt integrity check failed (the keytab's key is not the KDC's)
_TKT_EXPIRED = -1765328352         # Ticket expired
_SKEW = -1765328347                # Clock skew too great
_CC_NOTFOUND = -1765328243         # No Kerberos credentials available / Can't find client principal in cache
_KDCREP_SKEW = -1765328236         # Clock skew too great in KDC reply
_REALM_UNKNOWN = -1765328230       # Cannot find KDC for realm
_KDC_UNREACH = -1765328228         # Cannot contact any KDC for realm
_FCC_NOFILE = -1765328189          # No credentials cache found (also: the keytab offers no key for the principal)
_REALM_CANT_RESOLVE = -1765328164  # Cannot resolve network address for KDC in requested realm
_CONFIG_NODEFREALM = -1765328160   # Configuration file does not specify default realm


def _signed(code: int) -> int:
    """GSS-API hands minor statuses over as unsigned 32-bit numbers; krb5.h writes them signed."""
    return code - (1 << 32) if code >= 1 << 31 else code


class KerberosIdentity:
    """One cluster's Kerberos client: who it logs in as, where its key is, and why its last login failed."""

    _caches = itertools.count(1)

    def __init__(self, *, principal: str | None = None, keytab: str | None = None) -> None:
        self.principal, self.keytab = principal, keytab
        # One in-memory ticket cache per identity: its tickets serve every connection of the cluster, and MIT
        # fills it again from the keytab when they run out.  MEMORY caches live as long as the process.
        self.ccache = f"MEMORY:txnwatch-{next(self._caches)}"
        self.last_error: str | None = None

    def credentials(self) -> gssapi.Credentials | None:
        """This identity's initiator credentials; None for the process's defaults (kafka-python's behaviour)."""
        import gssapi

        if self.principal is None:
            return None
        name = gssapi.Name(self.principal, gssapi.NameType.kerberos_principal)
        if self.keytab is None:
            return gssapi.Credentials(name=name, usage="initiate")
        return gssapi.Credentials(name=name, usage="initiate",
                                  store={"client_keytab": self.keytab, "ccache": self.ccache})

    def __repr__(self) -> str:
        return f"KerberosIdentity(principal={self.principal!r}, keytab={self.keytab!r})"


def explain(exc: Exception, identity: KerberosIdentity, service: str) -> str:
    """One line for a failed GSS-API login: what is wrong, MIT's own words for it, and what to change.

    ``service`` is the broker's principal as asked for, ``kafka@host`` (a host-based service name)."""
    code = _signed(getattr(exc, "min_code", 0) or 0)
    who = identity.principal or "the default principal"
    broker = service.replace("@", "/", 1)
    source = f"the keytab {identity.keytab}" if identity.keytab else "the credential cache (KRB5CCNAME)"
    what, fix = _diagnose(code, getattr(exc, "maj_code", 0), identity, who, broker, source)
    return f"login as {who} failed: {what} ({_minor_message(exc)}); {fix}"


def _diagnose(code: int, major: int, identity: KerberosIdentity, who: str, broker: str,
              source: str) -> tuple[str, str]:
    """(what is wrong, what to change) for a Kerberos status; the codes are MIT's, see the table above."""
    if code == _FCC_NOFILE and identity.keytab:
        # MIT says "no credentials cache" when the keytab offers no key for the principal: say which it is.
        problem = keytab_problem(identity.keytab)
        if problem:
            return f"sasl_kerberos_keytab: {problem}", "put the principal's keytab there (kadmin ktadd exports one)"
        return (f"{source} holds no key for {who}",
                f"check sasl_kerberos_principal against `klist -k {identity.keytab}`, or export the principal's key "
                "into it (kadmin ktadd)")
    if code == _C_PRINCIPAL_UNKNOWN:
        return f"the KDC knows no principal {who}", "check sasl_kerberos_principal (its name and realm)"
    if code == _S_PRINCIPAL_UNKNOWN:
        return (f"the KDC knows no broker principal {broker}",
                "check sasl_kerberos_service_name and sasl_kerberos_domain_name: the brokers' principal is "
                "<service name>/<host>@REALM, the host being the broker's address unless the domain name is set")
    if code in (_PREAUTH_FAILED, _BAD_INTEGRITY):
        return (f"the KDC refused the key of {who} in {source}",
                "the principal's key has changed since the keytab was exported: export it again (kadmin ktadd)")
    if code in (_NAME_EXP, _CLIENT_REVOKED):
        return f"the principal {who} has expired or is locked in the KDC", "renew or unlock it there"
    if code == _KEY_EXP:
        return (f"the key (password) of {who} has expired in the KDC",
                "give the principal a new key and export it into the keytab")
    if major == _GSS_S_CONTEXT_EXPIRED:
        return (f"the ticket for {broker} ran out during the login",
                "the next connection gets a new one; if this repeats, check this host's clock (NTP) and the "
                "principal's ticket lifetime")
    if code == _TKT_EXPIRED or major == _GSS_S_CREDENTIALS_EXPIRED:
        return (f"the ticket of {who} in {source} has expired",
                "renew it (kinit, k5start), or set sasl_kerberos_keytab and txnwatch gets its tickets itself")
    if code in (_CC_NOTFOUND, _FCC_NOFILE):
        return (f"there is no ticket of {who} in the credential cache (KRB5CCNAME)",
                "set sasl_kerberos_keytab (with sasl_kerberos_principal), or kinit before txnwatch starts")
    if code in (_KDC_UNREACH, _REALM_CANT_RESOLVE):
        return ("no KDC of the realm answered",
                "check the realm's kdc entries in krb5.conf (KRB5_CONFIG) and that the KDC is reachable from here")
    if code in (_REALM_UNKNOWN, _CONFIG_NODEFREALM):
        return "krb5.conf (KRB5_CONFIG) names no KDC for the realm", "add the realm and its kdc under [realms]"
    if code in (_SKEW, _KDCREP_SKEW):
        return "this host's clock and the KDC's differ too much", "synchronise them (NTP)"
    return (f"getting a ticket for {broker} failed",
            "check sasl_kerberos_principal, sasl_kerberos_keytab and krb5.conf (KRB5_CONFIG)")


#: GSS-API routine errors (RFC 2744): credentials past their end time, and a context whose ticket ran out.
_GSS_S_CREDENTIALS_EXPIRED = 11 << 16
_GSS_S_CONTEXT_EXPIRED = 12 << 16


def _minor_message(exc: Exception) -> str:
    """MIT's own words for the failure (the minor status), else the major status's, on one line."""
    try:
        from gssapi.raw.misc import GSSError

        if isinstance(exc, GSSError):
            # MIT words a minor status from the message it kept for the thread's last failure; a status it has no
            # message for (not the last failure) is worded by the major status instead.
            text = " ".join(exc.get_all_statuses(exc.min_code, False)) if exc.min_code else ""
            if not text or text.startswith("gss_display_status call returned failure"):
                text = " ".join(exc.get_all_statuses(exc.maj_code, True))
        else:
            text = str(exc)
    except Exception:  # a status that cannot be displayed says at least what it was
        text = str(exc)
    return " ".join(text.split()) or type(exc).__name__


class KerberosMechanism(SaslMechanismGSSAPI):  # type: ignore[misc]  # kafka-python is untyped
    """kafka-python's GSSAPI exchange, with the cluster's :class:`KerberosIdentity` as its credentials.

    Only the constructor differs (it is where kafka-python opens the context and gets the tickets); the
    exchange of tokens and the security-layer negotiation are inherited."""

    def __init__(self, **config: Any) -> None:
        identity = config.get("sasl_oauth_token_provider")
        if not isinstance(identity, KerberosIdentity):
            identity = KerberosIdentity()
        try:
            import gssapi
        except (ImportError, OSError):
            identity.last_error = NO_BINDINGS
            raise KafkaConfigurationError(NO_BINDINGS) from None
        host = config.get("sasl_kerberos_domain_name") or config.get("host") or ""
        self._is_done = False
        self._is_authenticated = False
        self.auth_id = f"{config.get('sasl_kerberos_service_name') or 'kafka'}@{host}"
        self._identity = identity
        try:
            self.gssapi_name = gssapi.Name(self.auth_id, name_type=gssapi.NameType.hostbased_service).canonicalize(
                gssapi.MechType.kerberos)
            self._client_ctx = gssapi.SecurityContext(name=self.gssapi_name, usage="initiate",
                                                      creds=identity.credentials())
            self._next_token = self._client_ctx.step(None)
        except gssapi.exceptions.GSSError as exc:
            raise self._failed(exc) from None
        identity.last_error = None

    def receive(self, auth_bytes: bytes) -> None:
        """The broker's tokens; a GSS-API failure here (the context expired mid-login) is explained the same way."""
        import gssapi

        try:
            super().receive(auth_bytes)
        except gssapi.exceptions.GSSError as exc:
            raise self._failed(exc) from None

    def auth_details(self) -> str:
        """kafka-python logs this once the broker accepted the login; a context whose ticket ran out in that very
        moment cannot be asked its names any more, which must not undo the login."""
        import gssapi

        try:
            details: str = super().auth_details()
        except gssapi.exceptions.GSSError:
            details = f"Authenticated as {self._identity.principal or 'the default principal'} via SASL / GSSAPI"
        return details

    def _failed(self, exc: Exception) -> KafkaConfigurationError:
        self._identity.last_error = explain(exc, self._identity, self.auth_id)
        return KafkaConfigurationError(self._identity.last_error)


register_sasl_mechanism("GSSAPI", KerberosMechanism, overwrite=True)
