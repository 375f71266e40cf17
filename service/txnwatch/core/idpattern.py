"""The per-cluster ``transactional_id_pattern``: one pattern, the same answer from the broker and from us.

Kafka 4.1+ filters ListTransactions by this pattern itself (v2, KIP-1152); older brokers list every
id and txnwatch filters the listing.  Both must select exactly the same ids, or a tenant's view would
change with the broker's version.  The broker compiles the pattern with RE2/J
(``com.google.re2j.Pattern``, not ``java.util.regex``) and keeps an id when the pattern matches the
*whole* id (``Matcher.matches()``); we use ``re.fullmatch`` with ``re.ASCII``.

Whole means every character: ``.`` matches a newline too (``re.DOTALL`` here; the broker is sent the
pattern wrapped in RE2/J's ``(?s:…)``, :func:`wire_pattern`), so an id holding a control character is in
scope like any other (issue 38: ``.*`` left out an id with a newline, and with it its tenant's hanging
transactions).  The same holds for the include/exclude filters of topics and groups
(:func:`compile_name_filter`).

The two engines agree only on a subset, so the pattern is checked against that subset when the
configuration is read (``txnwatch config check``) and refused, with one line naming the construct,
outside it:

* allowed: literal characters, ``.``, escaped punctuation (``\\.``, ``\\-``), ``\\d \\D \\w \\W``
  (ASCII in RE2/J; ``re.ASCII`` here), character classes (``[a-z0-9_-]``, ``[^.]``), groups
  ``( )`` and ``(?: )``, alternation ``|``, the quantifiers ``* + ? {n} {n,} {n,m}`` (n, m <= 1000,
  RE2's limit) and their lazy forms, ``^`` at the very start and ``$`` at the very end;
* refused: look-arounds and back-references (RE2 has neither), inline flags and named groups
  (``(?i)``, ``(?P<..>)``: case folding differs), possessive quantifiers, ``\\s`` (RE2's lacks
  ``\\v``), ``\\b`` and every other escape letter (``\\p{..}``, ``\\Q..\\E``, ``\\A``, ``\\z``, ``\\x..``),
  POSIX or nested classes (``[[:alpha:]]``, ``[a&&b]``), ``{`` that is not a repeat, ``^``/``$``
  elsewhere (Python's ``$`` also matches before a trailing newline).
"""

from __future__ import annotations

import re

#: RE2's largest repeat count.
MAX_REPEAT = 1000
_ESCAPED_CLASSES = frozenset("dDwW")
_REPEAT = re.compile(r"\{(\d+)(,(\d*))?\}")


def pattern_problem(pattern: str) -> str | None:
    """Why ``pattern`` is outside the subset RE2/J and Python's ``re`` read alike, or None when it is inside."""
    if not pattern:
        return "is empty (the broker reads an empty pattern as no filter): leave the setting out instead"
    i, n = 0, len(pattern)
    previous_quantifiable = False
    while i < n:
        c = pattern[i]
        if c == "\\":
            if i + 1 >= n:
                return "ends with a lone backslash"
            nxt = pattern[i + 1]
            if nxt.isalnum() and nxt not in _ESCAPED_CLASSES:
                return f"uses the escape \\{nxt}, which RE2/J (the broker) and Python read differently or not at all"
            i, previous_quantifiable = i + 2, True
        elif c == "[":
            end, problem = _class_end(pattern, i)
            if problem:
                return problem
            i, previous_quantifiable = end, True
        elif c == "(":
            if pattern.startswith("(?", i) and not pattern.startswith("(?:", i):
                return (f"uses {pattern[i:i + 3]!r} (inline flags, named groups or look-arounds): "
                        "RE2/J (the broker) and Python differ there")
            i, previous_quantifiable = i + (3 if pattern.startswith("(?:", i) else 1), False
        elif c in "*+?":
            if not previous_quantifiable:
                return f"has a quantifier {c!r} with nothing to repeat"
            i, problem = _quantifier_suffix(pattern, i + 1)
            if problem:
                return problem
            previous_quantifiable = False
        elif c == "{":
            repeat = _REPEAT.match(pattern, i)
            if repeat is None:
                return "has a '{' that is not a repeat {n}, {n,} or {n,m} (the engines read a stray brace differently)"
            counts = [int(g) for g in (repeat.group(1), repeat.group(3)) if g]
            if max(counts) > MAX_REPEAT:
                return f"repeats more than {MAX_REPEAT} times, RE2/J's limit"
            if not previous_quantifiable:
                return "has a repeat with nothing to repeat"
            i, problem = _quantifier_suffix(pattern, repeat.end())
            if problem:
                return problem
            previous_quantifiable = False
        elif c == "^":
            if i != 0:
                return "uses '^' other than at the start"
            i, previous_quantifiable = i + 1, False
        elif c == "$":
            if i != n - 1:
                return "uses '$' other than at the end"
            i, previous_quantifiable = i + 1, False
        else:  # a literal, '.', ')' or '|'
            previous_quantifiable = c not in "|"
            i += 1
    try:
        re.compile(pattern, re.ASCII)
    except re.error as exc:
        return f"is not a valid regular expression: {exc}"
    return None


def _quantifier_suffix(pattern: str, i: int) -> tuple[int, str | None]:
    """Past a quantifier's lazy '?'; a possessive '+' is refused (RE2/J has none, Python 3.11+ does)."""
    if i < len(pattern) and pattern[i] == "+":
        return i, "uses a possessive quantifier, which RE2/J (the broker) refuses"
    return (i + 1 if i < len(pattern) and pattern[i] == "?" else i), None


def _class_end(pattern: str, start: int) -> tuple[int, str | None]:
    """Index after the class opened at ``start``, or why the class is outside the subset."""
    i = start + 1
    if i < len(pattern) and pattern[i] == "^":
        i += 1
    if i < len(pattern) and pattern[i] == "]":  # a leading ']' is literal in Python, an empty class error in RE2
        return i, "has a character class starting with ']' (escape it as \\])"
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            if i + 1 >= len(pattern):
                return i, "ends with a lone backslash"
            nxt = pattern[i + 1]
            if nxt.isalnum() and nxt not in _ESCAPED_CLASSES:
                return i, f"uses the escape \\{nxt} in a class, which RE2/J and Python read differently or not at all"
            i += 2
        elif c == "[":
            return i, "has '[' inside a character class (POSIX or nested classes differ between RE2/J and Python)"
        elif c == "&" and pattern.startswith("&&", i):
            return i, "has '&&' inside a character class (a Java intersection, literal elsewhere)"
        elif c == "]":
            return i + 1, None
        else:
            i += 1
    return i, "has an unterminated character class"


def compile_pattern(pattern: str) -> re.Pattern[str]:
    """The pattern as txnwatch applies it to a listing (``fullmatch``, ``.`` matching every character);
    call only on a checked pattern."""
    problem = pattern_problem(pattern)
    if problem:
        raise ValueError(f"transactional_id_pattern {pattern!r} {problem}")
    return re.compile(pattern, re.ASCII | re.DOTALL)


def wire_pattern(pattern: str) -> str:
    """The pattern as a broker is sent it (ListTransactions v2): in RE2/J's ``(?s:…)``, so its ``.`` matches
    a newline as ours does.  The user's pattern may not hold inline flags itself (:func:`pattern_problem`)."""
    return f"(?s:{pattern})"


def compile_name_filter(pattern: str) -> re.Pattern[str]:
    """A ``topics_include``/``groups_include``/… pattern as applied (``fullmatch``: the whole name, ``\\A…\\Z``;
    ``re.DOTALL``: over every character, a newline included), so ``.*`` selects every name there is."""
    return re.compile(pattern, re.DOTALL)
