"""Which policies keep one limiter scope for every job (their utilization is the policy's)."""

from __future__ import annotations

from datetime import UTC, datetime

from sweeper.config import Policy
from sweeper.config.key_template import KEY_FIELD_RE
from sweeper.models import NewJob
from sweeper.scheduling import scope_for
from sweeper_tools.planning.limits import POLICY_CONSTANT_FIELDS


def single_scope(policy: Policy) -> str | None:
    """The one limiter scope every job of the policy shares, or None if jobs have their own.

    A template over the policy and host only (kinds global, credential, endpoint) gives one
    scope per policy; one naming the tenant or object gives a scope per tenant or object.
    """
    fields = set(KEY_FIELD_RE.findall(policy.scope.key_template))
    if not fields <= POLICY_CONSTANT_FIELDS:
        return None
    return scope_for(policy, NewJob(tenant_id="", object_id="", due_at=datetime.now(UTC)))
