"""The limiter items one policy's consumer may touch, as IAM patterns (`dynamodb:LeadingKeys`).

Each limit's items are those its regimes' terms name (`LimitTerm.ITEMS`: a rate's bucket, a
cap's leases, a budget's windows), and its gate when a 429 can close it
(`sweeper.admission.regimes.has_gate`), under its limiter key (sweeper.limiter.keys). The CDK
app confines each consumer's role to them, so a `python` callable running with that role can
disturb no other policy's limits: a template's fields that are one per policy (`{policy}`,
`{host}`) are filled in, and the literal text up to its first per-call field (`{tenant_id}`,
`{object_id}`, `{params.*}`) becomes the prefix.

Some keys are shared with other policies by design, and are granted as they are: `{host}` (every
policy calling one API shares its endpoint limit) and a constant key (`"app"`, a vendor's
app-wide limit), and `closures#latest`, the latest closure's end, which every gate close
raises. A scope template that begins with a per-call field (`{tenant_id}` alone) has no prefix
to confine: its pattern is every scope key, and `unconfined_limits` names it so that synth can
say so.
"""

from __future__ import annotations

import re
from typing import Final

from sweeper.admission.regimes import has_gate, regime_of
from sweeper.admission.terms import GATE_ITEM, LimiterItem
from sweeper.config import Policy
from sweeper.config.key_template import KEY_FIELD_RE as _FIELD_RE
from sweeper.limiter.keys import BUDGET_KEY_PREFIX, CLOSURES_KEY, SCOPE_KEY_PREFIX

#: The items kept one per key and window, `PREFIX + KEY + "#" + WINDOW` (a budget's count,
#: sweeper.limiter.budget's `item_key`): the grant alone reads the window.
PER_WINDOW_PREFIXES: Final = frozenset({BUDGET_KEY_PREFIX})
#: What IAM's StringLike reads as a wildcard or a variable, and how it writes each literally.
_IAM_LITERAL = {"$": "${$}", "*": "${*}", "?": "${?}"}


def _iam_literal(text: str) -> str:
    return "".join(_IAM_LITERAL.get(char, char) for char in text)


def key_pattern(prefix: str, template: str, policy: Policy) -> str:
    """The StringLike pattern of every key `prefix + template` renders to for this policy."""
    wide = {"policy": policy.name, "host": policy.action.scope_host}

    def fill(match: re.Match[str]) -> str:
        return wide.get(match.group(1), match.group(0))

    filled = _FIELD_RE.sub(fill, template)
    per_call = _FIELD_RE.search(filled)
    if per_call is None:
        return _iam_literal(prefix + filled)
    return _iam_literal(prefix + filled[: per_call.start()]) + "*"


def item_pattern(item: LimiterItem, template: str, policy: Policy) -> str:
    """The pattern of one kind of item of a limit's keys: a per-window item's key, then `#`
    and the window (any; PER_WINDOW_PREFIXES)."""
    pattern = key_pattern(item.prefix, template, policy)
    per_window = item.prefix in PER_WINDOW_PREFIXES
    return pattern if not per_window or pattern.endswith("*") else pattern + "#*"


def limiter_key_patterns(policy: Policy) -> list[str]:
    """The patterns of every limiter item the policy's consumer reads or writes."""
    patterns = [key_pattern(SCOPE_KEY_PREFIX, policy.scope.key_template, policy)]
    for index, limit in enumerate(policy.limits):
        template = policy.scope.key_template if index == 0 else f"{limit.name}:{limit.key}"
        gate = (GATE_ITEM,) if has_gate(policy, index) else ()
        for item in dict.fromkeys((*gate, *regime_of(limit).items())):
            patterns.append(item_pattern(item, template, policy))
    patterns.append(CLOSURES_KEY)  # the first limit's gate is closed by a 429 (`has_gate`)
    return list(dict.fromkeys(patterns))


def unconfined_limits(policy: Policy) -> list[str]:
    """The policy's scope template when it begins with a per-call field: its keys share no
    prefix, so its consumer may touch every scope key (empty for every other policy)."""
    pattern = key_pattern(SCOPE_KEY_PREFIX, policy.scope.key_template, policy)
    return [policy.scope.key_template] if pattern == SCOPE_KEY_PREFIX + "*" else []
