"""URL passwords masked as ``user:***@`` wherever text leaves txnwatch (issue 23 item 10)."""

from __future__ import annotations

import pytest

from txnwatch.core.redact import redact


@pytest.mark.parametrize(("text", "expected"), [
    pytest.param("postgres://user:secret@db.example:5432/txn", "postgres://user:***@db.example:5432/txn",
                 id="database-url"),
    pytest.param("got 'postgresql+psycopg://u:secret@h/d'", "got 'postgresql+psycopg://u:***@h/d'", id="quoted"),
    pytest.param("a http://v:p1@k:1/m and https://w:p2@x/ end", "a http://v:***@k:1/m and https://w:***@x/ end",
                 id="two-urls-on-a-line"),
    pytest.param("postgresql://u:p@ss/w@rd@host:5432/db", "postgresql://u:***@host:5432/db",
                 id="unencoded-at-and-slash-in-the-password"),
    pytest.param("redis://:secret@cache:6379", "redis://:***@cache:6379", id="no-user"),
    pytest.param("http://user:secret@exporter:7071", "http://user:***@exporter:7071", id="at-the-end"),
    pytest.param("dsn host=db user=u password=secret dbname=t", "dsn host=db user=u password=*** dbname=t",
                 id="libpq-keywords"),
    pytest.param("password='se cret' port=5", "password=*** port=5", id="libpq-quoted"),
])
def test_passwords_are_masked(text: str, expected: str) -> None:
    assert redact(text) == expected


@pytest.mark.parametrize("text", [
    pytest.param("sqlite:///./var/txnwatch.db", id="sqlite"),
    pytest.param("http://kafka-1:7071/metrics", id="port-no-userinfo"),
    pytest.param("https://user@host/path", id="user-without-password"),
    pytest.param("page oncall@example.com now", id="mail-address"),
    pytest.param("transactional id orders-0_1 fenced at epoch 3", id="plain"),
])
def test_text_without_a_password_is_unchanged(text: str) -> None:
    assert redact(text) == text


def test_a_short_secret_registered_for_the_process_masks_nothing_else() -> None:
    """A one-letter PagerDuty routing key (a test's, or a typo's) must not blot out every 'k' of every log line;
    a key of credential length is still masked wherever it appears."""
    from txnwatch.core import redact as module

    module.register(module.Secret.token("k", "**********"))
    assert redact("kafka-1:7071 key id") == "kafka-1:7071 key id"
    module.register(module.Secret.token("R0UT1NGKEY0123456789abcdef012345", "**********"))
    assert redact("sent R0UT1NGKEY0123456789abcdef012345 to pagerduty") == "sent ********** to pagerduty"
