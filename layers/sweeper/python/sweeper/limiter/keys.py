"""The limiter table's keys, and the patterns of those one policy's consumer may touch.

A limit's items are `scope#KEY` (its bucket and gate, `sweeper.limiter.dynamodb`; a limit with
no rate has only the gate, when a 429 can name it: `has_gate`) and
`lease#KEY` (a concurrency cap's leases, `sweeper.limiter.leases`) and `budget#KEY#WINDOW` (a
budget's count, `sweeper.limiter.budget`), where KEY is the job's scope
for the first limit and `NAME:RENDERED` for each further one (`LimitConfig.limiter_key`). The
CDK app confines each consumer's role to its own policy's keys (`dynamodb:LeadingKeys`), so a
`python` callable running with that role can disturb no other policy's limits: a template's
fields that are one per policy (`{policy}`, `{host}`) are filled in, and the literal text up to
its first per-call field (`{tenant_id}`, `{object_id}`, `{params.*}`) becomes the prefix.

Some keys are shared with other policies by design, and are granted as they are: `{host}` (every
policy calling one API shares its endpoint limit) and a constant key (`"app"`, a vendor's
app-wide limit), and `closures#latest`, the latest closure's end, which every gate close
raises (sweeper.limiter.closures). A scope template that begins with a per-call field
(`{tenant_id}` alone) has no prefix to confine: its pattern is every scope key, and
`unconfined_limits` names it so that synth can say so.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from sweeper.config.key_template import KEY_FIELD_RE as _FIELD_RE

if TYPE_CHECKING:
    from sweeper.config import Policy

#: A scope's bucket and gate, one item per limiter key.
SCOPE_KEY_PREFIX = "scope#"
#: A concurrency cap's leases, one item per limiter key.
LEASE_KEY_PREFIX = "lease#"
#: A budget's count, one item per limiter key and window (sweeper.limiter.budget).
BUDGET_KEY_PREFIX = "budget#"
#: The latest closure's end, one item for the table (sweeper.limiter.closures): every gate
#: close raises it, so every consumer is granted it, as it is.
CLOSURES_KEY = "closures#latest"

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


def limiter_key_patterns(policy: Policy) -> list[str]:
    """The patterns of every limiter item the policy's consumer reads or writes."""
    patterns = [key_pattern(SCOPE_KEY_PREFIX, policy.scope.key_template, policy)]
    for index, limit in enumerate(policy.limits):
        template = policy.scope.key_template if index == 0 else f"{limit.name}:{limit.key}"
        if index and has_gate(policy, index):
            patterns.append(key_pattern(SCOPE_KEY_PREFIX, template, policy))
        if limit.max_in_flight is not None:
            patterns.append(key_pattern(LEASE_KEY_PREFIX, template, policy))
        if limit.budget is not None:
            patterns.append(budget_pattern(template, policy))
    patterns.append(CLOSURES_KEY)  # the first limit's gate is closed by a 429 (`has_gate`)
    return list(dict.fromkeys(patterns))


def has_gate(policy: Policy, index: int) -> bool:
    """Whether a 429 can close the policy's limit at `index` (its gate is `scope#KEY`): the
    job's scope (the first), a further rate (a bare 429 may implicate it), and any limit that
    `action.limit_header_values` names, whatever its regimes (sweeper.admission.limit_gates)."""
    limit = policy.limits[index]
    named = limit.name in set(policy.action.limit_values.values())
    return index == 0 or limit.rate is not None or named


def budget_pattern(template: str, policy: Policy) -> str:
    """The pattern of a budget's items: its key's, then `#` and the window (any)."""
    pattern = key_pattern(BUDGET_KEY_PREFIX, template, policy)
    return pattern if pattern.endswith("*") else pattern + "#*"


def unconfined_limits(policy: Policy) -> list[str]:
    """The policy's scope template when it begins with a per-call field: its keys share no
    prefix, so its consumer may touch every scope key (empty for every other policy)."""
    pattern = key_pattern(SCOPE_KEY_PREFIX, policy.scope.key_template, policy)
    return [policy.scope.key_template] if pattern == SCOPE_KEY_PREFIX + "*" else []
