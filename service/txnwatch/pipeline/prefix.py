"""Transactional-id prefix rules: how many instances of one application group together.

Kafka Streams and Flink name transactional ids ``<app>-<task or subtask>``, so the
default groups by the text before the last '-'.  The same rule exists twice — as a
Spark column for the jobs and in plain Python for tests and ad-hoc use — and the two
must agree.
"""

from __future__ import annotations

import re

from pyspark.sql import Column
from pyspark.sql import functions as F

DEFAULT_RULE = "last-dash"


def validate(rule: str) -> str:
    if rule == "last-dash" or rule == "none":
        return rule
    if rule.startswith("first:") and rule[6:].isdigit() and int(rule[6:]) > 0:
        return rule
    if rule.startswith("regex:"):
        re.compile(rule[6:])
        return rule
    raise ValueError(f"unknown prefix rule {rule!r}: use last-dash, none, first:N or regex:PATTERN (group 1)")


def prefix_of(rule: str, txn_id: str) -> str:
    if rule == "none":
        return txn_id
    if rule == "last-dash":
        return txn_id.rsplit("-", 1)[0] if "-" in txn_id else txn_id
    if rule.startswith("first:"):
        return txn_id[: int(rule[6:])]
    found = re.search(rule[6:], txn_id)
    return found.group(1) if found and found.group(1) else txn_id


def prefix_column(rule: str, txn_id: Column) -> Column:
    validate(rule)
    if rule == "none":
        return txn_id
    if rule == "last-dash":
        return F.when(F.instr(txn_id, "-") > 0, F.regexp_extract(txn_id, r"^(.*)-[^-]*$", 1)).otherwise(txn_id)
    if rule.startswith("first:"):
        return F.substring(txn_id, 1, int(rule[6:]))
    extracted = F.regexp_extract(txn_id, rule[6:], 1)
    return F.when(extracted == "", txn_id).otherwise(extracted)
