"""No twins: one definition per concept across the rooms, so a reader finds it once and it cannot drift.

Read from the source with ``ast``. The probes feed the checks synthetic sources and show they fail.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "service" / "txnwatch"

#: Modules that may convert between epoch milliseconds and datetimes by hand: the one conversion module, and
#: msk.py, whose clock is in seconds (SigV4 signing), not milliseconds.
CONVERTERS = {"core/epoch.py", "kafka/msk.py"}


def _sources(root: Path = PACKAGE) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text() for p in sorted(root.rglob("*.py"))}


def classes_in_two_rooms(sources: dict[str, str]) -> dict[str, list[str]]:
    rooms: dict[str, set[str]] = defaultdict(set)
    for name, text in sources.items():
        room = name.split("/")[0] if "/" in name else ""
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                rooms[node.name].add(room)
    return {cls: sorted(r) for cls, r in rooms.items() if len(r) > 1}


def exit_code_copies(sources: dict[str, str]) -> list[str]:
    """Assignments to EXIT_* names anywhere: exit codes are core/exitcodes.py's names only."""
    found = []
    for name, text in sources.items():
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, ast.Assign):
                continue
            for target in node.targets:
                for leaf in ast.walk(target):
                    if isinstance(leaf, ast.Name) and leaf.id.startswith("EXIT_"):
                        found.append(f"{name}:{node.lineno} {leaf.id}")
    return found


def hand_conversions(sources: dict[str, str]) -> list[str]:
    """``datetime.fromtimestamp(...)`` or ``x.timestamp() * 1000`` outside the conversion module (microseconds for
    Parquet, ``* 1e6``, are another unit)."""
    found = []
    for name, text in sources.items():
        if name in CONVERTERS:
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "fromtimestamp":
                found.append(f"{name}:{node.lineno} fromtimestamp")
            if (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult) and isinstance(node.left, ast.Call)
                    and isinstance(node.left.func, ast.Attribute) and node.left.func.attr == "timestamp"
                    and isinstance(node.right, ast.Constant) and node.right.value == 1000):
                found.append(f"{name}:{node.lineno} timestamp() *")
    return found


#: Where ``rpartition("-")`` reads something other than "topic-partition" text: core/model.py parses that text
#: itself (split_topic_partition); core/frameworks.py reads a transactional id's name from the right, as Kafka
#: Streams and Flink build it (``<application>-<process>-<thread>``, ``<prefix>-<subtask>-<checkpoint>``).
OTHER_DASHED_TEXT = frozenset({"core/model.py", "core/frameworks.py"})


def topic_partition_parsers(sources: dict[str, str]) -> list[str]:
    """``text.rpartition("-")`` outside OTHER_DASHED_TEXT: "topic-partition" text is read back by split_topic_partition."""
    found = []
    for name, text in sources.items():
        if name in OTHER_DASHED_TEXT:
            continue
        for node in ast.walk(ast.parse(text)):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "rpartition"
                    and node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value == "-"):
                found.append(f"{name}:{node.lineno}")
    return found


def test_no_class_name_in_two_rooms() -> None:
    assert classes_in_two_rooms(_sources()) == {}


def test_exit_codes_live_only_in_exitcodes() -> None:
    assert exit_code_copies(_sources()) == []


def test_ms_and_datetimes_cross_only_in_core_epoch() -> None:
    assert hand_conversions(_sources()) == []


def test_topic_partition_text_is_parsed_in_one_place() -> None:
    assert topic_partition_parsers(_sources()) == []


def test_probe_twins_are_found() -> None:
    sources = {"store/a.py": "class Backoff:\n    pass\n", "collect/b.py": "class Backoff:\n    pass\n",
               "collect/c.py": "class Backoff:\n    pass\n", "cli/d.py": "EXIT_OK, EXIT_BAD = 0, 1\n",
               "serve/e.py": "from datetime import datetime\n"
                             "def f(ms, at):\n    return datetime.fromtimestamp(ms / 1000), int(at.timestamp() * 1000)\n"}
    assert classes_in_two_rooms(sources) == {"Backoff": ["collect", "store"]}
    assert exit_code_copies(sources) == ["cli/d.py:1 EXIT_OK", "cli/d.py:1 EXIT_BAD"]
    assert hand_conversions(sources) == ["serve/e.py:3 fromtimestamp", "serve/e.py:3 timestamp() *"]
    assert topic_partition_parsers({"store/f.py": "def _split(tp):\n    return tp.rpartition('-')\n"}) == ["store/f.py:2"]
