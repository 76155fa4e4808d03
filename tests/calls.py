"""One job as an action receives it, for tests that call an action directly."""

from __future__ import annotations

from typing import Any

from sweeper.models import ActionCall, operation_key


def action_call(policy: str, tenant_id: str, object_id: str, **params: Any) -> ActionCall:
    """The first attempt of the job of (`tenant_id`, `object_id`) under version 1 of `policy`."""
    key = operation_key(policy, tenant_id, object_id, 1)
    return ActionCall(
        key=key,
        idempotency_key=key,
        policy=policy,
        policy_version=1,
        tenant_id=tenant_id,
        object_id=object_id,
        scope=policy,
        attempt=0,
        batch_id="b1",
        params=params,
    )
