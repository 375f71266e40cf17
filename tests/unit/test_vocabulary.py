"""One vocabulary: the reasons and alerts of txnwatch.core.vocabulary are the ones code, docs and rules use."""

from __future__ import annotations

import importlib.util
import pathlib
import re
from typing import Any

import yaml

from txnwatch.alerting.rules import DEFAULT_RULES
from txnwatch.core import vocabulary as v
from txnwatch.core.model import HangingReason

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _render_script() -> Any:
    spec = importlib.util.spec_from_file_location("render_vocabulary", ROOT / "scripts" / "render_vocabulary.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_reason_has_a_plain_explanation_and_a_fix() -> None:
    assert HangingReason is v.HangingReason
    assert set(v.REASONS) == set(HangingReason)
    for reason, term in v.REASONS.items():
        assert term.name == reason.value and term.explanation.endswith(".") and term.fix


def test_docs_vocabulary_section_is_current() -> None:
    text = (ROOT / "docs" / "metrics.md").read_text()
    assert _render_script().render(text) == text, "run: .venv/bin/python scripts/render_vocabulary.py"
    # No reason is documented anywhere in docs/ that the code does not know.
    documented = set(re.findall(r"reason[=:]\s*`?([a-z_]+)", (ROOT / "docs").joinpath("metrics.yaml").read_text()))
    assert documented <= {r.value for r in HangingReason} | {"one"}


def test_builtin_rules_take_names_and_severities_from_the_vocabulary() -> None:
    assert set(DEFAULT_RULES) == set(v.BY_RULE)
    for name, rule in DEFAULT_RULES.items():
        assert rule.severity == v.BY_RULE[name].severity and rule.for_seconds == v.BY_RULE[name].for_seconds


def test_prometheus_rules_and_runbooks_use_the_vocabulary() -> None:
    groups = yaml.safe_load((ROOT / "deploy" / "prometheus" / "txnwatch-rules.yaml").read_text())["groups"]
    rules = {r["alert"]: r for g in groups for r in g["rules"] if "alert" in r}
    assert set(rules) == set(v.BY_PROMETHEUS)
    headings = set(re.findall(r"^## (\w+)$", (ROOT / "docs" / "runbooks.md").read_text(), re.M))
    for name, rule in rules.items():
        alert = v.BY_PROMETHEUS[name]
        assert rule["labels"]["severity"] == alert.route.value, name
        assert rule["annotations"]["runbook_url"].endswith(f"#{alert.anchor}"), name
        assert name in headings, f"docs/runbooks.md has no section for {name}"


def test_api_schema_enumerates_the_reasons_and_severities() -> None:
    from txnwatch.serve.api.schemas import AlertOut, HangingEpisodeOut

    defs = HangingEpisodeOut.model_json_schema()["$defs"]
    assert defs["HangingReason"]["enum"] == [r.value for r in HangingReason]
    assert AlertOut.model_json_schema()["$defs"]["Severity"]["enum"] == [s.value for s in v.Severity]


def test_moves_polling_calls_illegal_are_derived_from_kafkas_valid_previous_states() -> None:
    """Within one transaction (same producer id and start time) unseen moves may happen between polls, but
    nothing leads back from a decided or finished transaction, nor from one outcome to the other."""
    S = v.TxnState
    ON, PC, PA, CC, CA, F = (S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT, S.COMPLETE_COMMIT, S.COMPLETE_ABORT,
                             S.PREPARE_EPOCH_FENCE)
    assert {
        PC: {ON, PA, CA, F},
        PA: {ON, PC, CC, F},
        F: {ON, PC, CC},
        CC: {ON, PC, PA, CA, F},
        CA: {ON, PC, PA, CC, F},
    } == v.ILLEGAL_WITHIN_TRANSACTION


def test_states_by_status_id_follow_kafkas_transaction_state_ids() -> None:
    assert [s.value for s in v.STATE_BY_ID] == ["Empty", "Ongoing", "PrepareCommit", "PrepareAbort",
                                                 "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"]


#: String literals equal to a state or event name that are not one: the "abort" subcommand of
#: kafka-transactions.sh and of txnwatch's own command line, in the modules that write those command lines.
_NOT_OURS = {("alerting/conditions.py", "abort"), ("lab/reference.py", "abort"), ("core/commands.py", "abort")}


def test_no_state_or_event_is_spelled_outside_the_vocabulary() -> None:
    """Code and benchmarks name states and events through TxnState / TxnEvent: no word drifts in one place."""
    import ast

    words = {e.value for e in v.TxnEvent} | {s.value for s in v.TxnState}
    package = ROOT / "service" / "txnwatch"
    found = []
    for path in [*sorted(package.rglob("*.py")), *sorted((ROOT / "benchmarks").rglob("*.py"))]:
        name = path.relative_to(package if path.is_relative_to(package) else ROOT).as_posix()
        if name == "core/vocabulary.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in words
                    and (name, node.value) not in _NOT_OURS):
                found.append(f"{name}:{node.lineno} {node.value!r}")
    for path in sorted(package.rglob("*.html")):
        found += [f"{path.relative_to(package)}: {m}" for m in re.findall(r"""["']([A-Za-z_]+)["']""", path.read_text())
                  if m in words]
    assert found == []


def test_each_events_plain_word_is_its_members_value() -> None:
    """The hot path's plain words (core/vocabulary.py, beside the enum) are the members' values, one per member."""
    for event in v.TxnEvent:
        word = getattr(v, event.name)
        assert type(word) is str and word == event.value, event


def test_no_module_but_the_vocabulary_binds_an_event_name() -> None:
    """An event is named through core.vocabulary (TxnEvent or its plain word), never bound again at a module's
    top level (``COMMIT = TxnEvent.COMMIT.value``): such a copy is a second name others then import."""
    import ast

    package = ROOT / "service" / "txnwatch"
    found = []
    for path in sorted(package.rglob("*.py")):
        name = path.relative_to(package).as_posix()
        if name == "core/vocabulary.py":
            continue
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None and any(
                    _is_event(value) for value in (node.value.elts if isinstance(node.value, ast.Tuple)
                                                   else [node.value])):
                found.append(f"{name}:{node.lineno}")
    assert found == []


def _is_event(node: object) -> bool:
    """``TxnEvent.X`` or ``TxnEvent.X.value`` (tables keyed by events are no copy of a name)."""
    import ast

    if isinstance(node, ast.Attribute) and node.attr == "value":
        node = node.value
    return (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "TxnEvent")


def test_api_schema_enumerates_states_and_events() -> None:
    from txnwatch.serve.api.schemas import TransactionDetail, TransitionOut

    defs = TransactionDetail.model_json_schema()["$defs"]
    assert defs["TxnState"]["enum"] == [s.value for s in v.TxnState]
    assert TransitionOut.model_json_schema()["$defs"]["TxnEvent"]["enum"] == [e.value for e in v.TxnEvent]
    assert TransitionOut.model_json_schema()["$defs"]["TransitionSource"]["enum"] == [s.value for s in
                                                                                     v.TransitionSource]


def test_every_event_has_a_meaning() -> None:
    assert list(v.EVENTS) == list(v.TxnEvent)
    assert all(meaning.endswith(".") for meaning in v.EVENTS.values())
