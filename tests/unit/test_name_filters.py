"""Include-all means all (issue 38 item 8): every name filter matches the whole name over every character.

``groups_include``/``groups_exclude``, ``topics_include``/``topics_exclude`` and ``transactional_id_pattern`` are
applied with ``fullmatch`` (``\\A…\\Z``: never a search, ``$`` never before a trailing newline) and ``re.DOTALL``
(``.`` matches a newline): a tenant cannot step out of ``.*`` by putting a control character in its group id.
"""

from __future__ import annotations

import pytest

from txnwatch.core.config import ClusterConfig
from txnwatch.kafka import ClusterConnectionSettings

NAMES = {
    "plain": "orders",
    "newline": "orders\nhidden",
    "trailing-newline": "orders\n",
    "leading-newline": "\norders",
    "carriage-return": "orders\r",
    "escape": "\x1b[2Korders",
    "nul": "orders\x00x",
    "line-separator": "orders\u2028x",
    "forged-log-line": "g\n2026-01-01 00:00:00,000 CRITICAL forged",
}

#: pattern -> the names it selects, written out by hand.
CASES = [
    pytest.param(".*", set(NAMES), id="dot-star-is-every-name"),
    pytest.param(".+", set(NAMES), id="dot-plus-is-every-non-empty-name"),
    pytest.param("orders", {"plain"}, id="a-literal-is-one-name"),
    pytest.param("orders$", {"plain"}, id="dollar-is-the-end-not-before-a-newline"),
    pytest.param("^orders", {"plain"}, id="caret-is-the-start-not-a-search"),
    pytest.param("orders.*", {"plain", "newline", "trailing-newline", "carriage-return", "nul", "line-separator"},
                 id="prefix-over-control-characters"),
    pytest.param(".*orders", {"plain", "leading-newline", "escape"}, id="suffix-over-control-characters"),
    pytest.param("orders.hidden", {"newline"}, id="dot-is-a-newline-too"),
    pytest.param("[a-z]+", {"plain"}, id="a-class-is-only-its-characters"),
]


def _settings(**kwargs: object) -> ClusterConnectionSettings:
    return ClusterConnectionSettings.from_config(ClusterConfig(name="a", bootstrap_servers=["h:1"], **kwargs))


@pytest.mark.parametrize(("pattern", "selected"), CASES)
def test_groups_include(pattern: str, selected: set[str]) -> None:
    settings = _settings(groups_include=[pattern])
    assert {key for key, name in NAMES.items() if settings.watches_group(name)} == selected


@pytest.mark.parametrize(("pattern", "selected"), CASES)
def test_groups_exclude(pattern: str, selected: set[str]) -> None:
    settings = _settings(groups_exclude=[pattern])
    assert {key for key, name in NAMES.items() if not settings.watches_group(name)} == selected


@pytest.mark.parametrize(("pattern", "selected"), CASES)
def test_topics_include(pattern: str, selected: set[str]) -> None:
    settings = _settings(topics_include=[pattern], topics_exclude=[])
    assert {key for key, name in NAMES.items() if settings.watches(name)} == selected


@pytest.mark.parametrize(("pattern", "selected"), CASES)
def test_topics_exclude(pattern: str, selected: set[str]) -> None:
    settings = _settings(topics_exclude=[pattern])
    assert {key for key, name in NAMES.items() if not settings.watches(name)} == selected


@pytest.mark.parametrize(("pattern", "selected"), CASES)
def test_transactional_id_pattern(pattern: str, selected: set[str]) -> None:
    settings = _settings(transactional_id_pattern=pattern)
    assert {key for key, name in NAMES.items() if settings.lists_transaction(name)} == selected


def test_the_defaults_watch_every_group_and_every_non_internal_topic() -> None:
    settings = _settings()
    assert all(settings.watches_group(name) for name in NAMES.values())
    assert all(settings.watches(name) for name in NAMES.values())
    assert not settings.watches("__consumer_offsets") and not settings.watches("__\nx")
