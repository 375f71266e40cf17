"""transactional_id_pattern: the subset RE2/J (the broker, KIP-1152) and Python's re read alike.

The refusals name constructs where the two engines really differ (or one refuses); the matches are
written out by hand from RE2's documented semantics (whole-id match, ASCII \\d and \\w).  The lab test
(tests/kafka/test_list_filters_lab.py) asks a Kafka 4.1+ broker for the same answers.
"""

from __future__ import annotations

import pytest

from txnwatch.core.idpattern import compile_pattern, pattern_problem


@pytest.mark.parametrize("pattern", [
    pytest.param("team-a-.*", id="prefix"),
    pytest.param("^orders\\..+$", id="anchors-at-the-ends"),
    pytest.param("(billing|ledger)-[0-9]{2,4}", id="group-alternation-repeat"),
    pytest.param("(?:a|b)+?x", id="non-capturing-lazy"),
    pytest.param("[^.]*\\.\\d\\w", id="negated-class-and-ascii-escapes"),
    pytest.param("[a-z0-9_\\-]{1000}", id="largest-repeat"),
    pytest.param("ümlaut-.*", id="non-ascii-literal"),
])
def test_accepted(pattern: str) -> None:
    assert pattern_problem(pattern) is None


@pytest.mark.parametrize(("pattern", "words"), [
    pytest.param("", "empty", id="empty-is-no-filter-at-the-broker"),
    pytest.param("(?i)team", "inline flags", id="inline-flags-case-folding-differs"),
    pytest.param("(?P<t>a)", "inline flags", id="named-group"),
    pytest.param("a(?=b)", "look-arounds", id="lookahead-not-in-re2"),
    pytest.param("(a)\\1", "escape \\1", id="backreference-not-in-re2"),
    pytest.param("a\\sb", "escape \\s", id="s-differs-on-vertical-tab"),
    pytest.param("\\bteam", "escape \\b", id="word-boundary"),
    pytest.param("\\p{L}+", "escape \\p", id="unicode-class-re2-only"),
    pytest.param("\\Qa.b\\E", "escape \\Q", id="quoting-re2-only"),
    pytest.param("a\\z", "escape \\z", id="end-of-text-escape"),
    pytest.param("[[:alpha:]]+", "inside a character class", id="posix-class"),
    pytest.param("[a-z&&[^q]]", "inside a character class", id="java-intersection-nested"),
    pytest.param("[a&&b]", "&&", id="java-intersection"),
    pytest.param("[]a]", "starting with ']'", id="leading-bracket-in-class"),
    pytest.param("a++", "possessive", id="possessive"),
    pytest.param("a{2}+", "possessive", id="possessive-repeat"),
    pytest.param("a{,3}", "not a repeat", id="python-only-open-repeat"),
    pytest.param("a{", "not a repeat", id="stray-brace"),
    pytest.param("a{1001}", "1000", id="repeat-over-re2-limit"),
    pytest.param("a|^b", "'^' other than at the start", id="caret-inside"),
    pytest.param("a$|b", "'$' other than at the end", id="dollar-inside"),
    pytest.param("*a", "nothing to repeat", id="nothing-to-repeat"),
    pytest.param("(a", "not a valid regular expression", id="unbalanced"),
    pytest.param("[a-", "unterminated", id="unterminated-class"),
    pytest.param("a\\", "lone backslash", id="trailing-backslash"),
])
def test_refused_with_one_line(pattern: str, words: str) -> None:
    problem = pattern_problem(pattern)
    assert problem is not None and words in problem and "\n" not in problem


@pytest.mark.parametrize(("pattern", "transactional_id", "kept"), [
    pytest.param("team-a-.*", "team-a-orders", True, id="prefix-kept"),
    pytest.param("team-a-.*", "xteam-a-orders", False, id="whole-id-not-search"),
    pytest.param("team-a", "team-a-orders", False, id="no-implicit-suffix"),
    pytest.param("\\d+", "١٢٣", False, id="d-is-ascii-as-in-re2"),
    pytest.param("\\w+", "café", False, id="w-is-ascii-as-in-re2"),
    pytest.param("caf.", "café", True, id="dot-is-one-code-point"),
    pytest.param("a.b", "a\nb", True, id="dot-matches-newline"),
    pytest.param(".*", "team\n2026-01-01 CRITICAL\x1b[0m", True, id="everything-is-everything"),
    pytest.param("a$", "a\n", False, id="dollar-never-before-a-trailing-newline"),
])
def test_whole_id_ascii_matching(pattern: str, transactional_id: str, kept: bool) -> None:
    assert (compile_pattern(pattern).fullmatch(transactional_id) is not None) is kept


def test_compile_refuses_what_the_check_refuses() -> None:
    with pytest.raises(ValueError, match="transactional_id_pattern '\\(\\?i\\)a'"):
        compile_pattern("(?i)a")
