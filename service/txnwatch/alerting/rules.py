"""Effective rule settings: built-in defaults, with only the fields an operator actually set overriding them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from txnwatch.core.config import AlertRuleConfig
from txnwatch.core.vocabulary import BY_RULE

# Detectors already wait their own thresholds (DetectionConfig), so `for` only damps flapping.
DEFAULT_RULES: Final[Mapping[str, AlertRuleConfig]] = {
    name: AlertRuleConfig(for_seconds=alert.for_seconds, severity=alert.severity)
    for name, alert in BY_RULE.items()
}
FALLBACK_RULE: Final = AlertRuleConfig()


def effective_rules(overrides: Mapping[str, AlertRuleConfig] | None = None) -> dict[str, AlertRuleConfig]:
    """``Settings.alert_rules`` merged field by field over the defaults.

    An operator writing ``lso_stall: {severity: warning}`` means "keep the default
    for:", not "for: 0", hence ``model_fields_set``.
    """
    merged = dict(DEFAULT_RULES)
    for name, override in (overrides or {}).items():
        base = merged.get(name, FALLBACK_RULE)
        merged[name] = base.model_copy(update={f: getattr(override, f) for f in override.model_fields_set})
    return merged


def rule_for(rules: Mapping[str, AlertRuleConfig], name: str) -> AlertRuleConfig:
    return rules.get(name) or DEFAULT_RULES.get(name) or FALLBACK_RULE
