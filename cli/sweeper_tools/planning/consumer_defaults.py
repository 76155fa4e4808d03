"""The consumer sizing a user does not tune: derived from the limits and the vendor's latency.

A policy states the vendor's contract (its limits, and `action.latency_p50_seconds` /
`latency_p95_seconds` as measured, else its kind's default). Of the consumer's `DERIVED_FIELDS`,
each the policy leaves out is what the plan derives from that contract, as the demo sizes its
own consumer (sweeper_local.demo):

- parallel calls: the plan's recommendation for the policy's environments (the calls its rate
  needs in flight at the p95 service time and the wait for a narrow key's slot, shared out; at
  most `MAX_PARALLEL_CALLS`), and never more than a batch the policy sets. The rate is the most
  the limits let the policy call: with a limit whose key is the same for every call (an
  app-wide one), its ceiling, planned at the fewest busy scopes that reach it (each scope's key
  then busiest, its slot the longest wait: `slot_wait.fewest_binding_scopes`); else one busy
  scope's, as `sweeper plan` plans by default (synth does not know how many tenants will be
  busy: more environments carry more);
- batch size: the most records of an SQS batch that needs no batching window, in whole rounds
  of the parallel calls, so that no thread idles through a batch's last round;
- batching window: none, unless the batch is above SQS's size without one (then Lambda's 1 s);
- timeout: what the plan says a batch so sized needs (`BatchNeed.timeout_seconds`) when one
  scope alone is busy, its slots the slowest to come;
- memory: the least that carries the planned rate on the CPU share Lambda gives it (the plan's
  CPU rule, `planning.cpu`: its environments' CPU at most `CPU_BUSY_SHARE` busy), in steps of
  `MEMORY_STEP_MB`, and never below `MIN_DERIVED_MEMORY_MB`. Lambda bills a consumer's
  GB-seconds whether it computes or waits for its slots, so memory beyond what its CPU needs is
  paid for by every job.

What the policy sets is kept. A policy that states no latency keeps the defaults. Synth deploys
`deployed_policy` (the CDK app's pipeline), `sweeper plan` plans it, the demo sizes by it.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Final

from sweeper.config import ConsumerConfig, Policy, SweeperConfig
from sweeper.limits import (
    LAMBDA_MAX_TIMEOUT_SECONDS,
    MAX_BATCH_SIZE_WITHOUT_WINDOW,
    MB_PER_VCPU,
)
from sweeper_tools.planning.cpu import cpu_bound
from sweeper_tools.planning.limits import key_span
from sweeper_tools.planning.plan import (
    DEFAULT_CPU_SECONDS_PER_JOB,
    DEFAULT_OVERHEAD_SECONDS,
    Plan,
    PlanInput,
    make_plan,
)
from sweeper_tools.planning.slot_wait import fewest_binding_scopes

#: The consumer's fields derived when a policy leaves them out, in the order the plan prints.
DERIVED_FIELDS: Final = (
    "parallel_calls",
    "batch_size",
    "batch_window_seconds",
    "timeout_seconds",
    "memory_mb",
)
#: The least memory a consumer is derived: twice the largest peak resident memory measured of a
#: consumer environment (95 MiB in `sweeper bench examples --example shipped`, which reports
#: `consumer_max_rss_mb`: the runtime, boto3, Powertools and psycopg loaded, four calls at
#: once), rounded up to a multiple of 128 MB, so that a larger answer or a few more clients
#: never meet Lambda's out-of-memory end.
MIN_DERIVED_MEMORY_MB: Final = 256
#: The derived memory's steps (Lambda takes any whole MB from 128 to 10,240).
MEMORY_STEP_MB: Final = 64
#: Scopes busy at once when an app-wide limit binds and no limit keyed per scope states a rate
#: (`fewest_binding_scopes` has no figure): enough that none of them binds.
EVERY_SCOPE: Final = 1_000_000


def derived_consumer(
    policy: Policy,
    latency: tuple[float, float] | None = None,
    overhead_seconds: float = DEFAULT_OVERHEAD_SECONDS,
) -> ConsumerConfig:
    """The policy's consumer, each of `DERIVED_FIELDS` it does not set derived (see the module
    docstring) at `latency` (p50, p95; default: the policy's own, `action.latency`)."""
    consumer = policy.consumer
    latency = latency or policy.action.latency
    given: dict[str, Any] = {name: getattr(consumer, name) for name in consumer.model_fields_set}
    if latency is None or all(name in given for name in DERIVED_FIELDS):
        return consumer
    p50, p95 = latency
    vendor = PlanInput(
        latency_p50_seconds=p50,
        latency_p95_seconds=max(p50, p95),
        overhead_seconds=overhead_seconds,
    )
    app_wide = any(not key_span(limit) for limit in policy.limits)
    fewest = fewest_binding_scopes(policy) or EVERY_SCOPE
    busiest = replace(vendor, scopes=fewest) if app_wide else vendor
    batch: int | None = given.get("batch_size")
    parallel: int | None = given.get("parallel_calls")
    if parallel is None:
        draft = _sized(policy, given, parallel_calls=1, batch_size=batch or 1)
        parallel = make_plan(draft, busiest).recommended_parallel_calls
        parallel = min(parallel, batch) if batch is not None else parallel
    if batch is None:
        batch = max(parallel, MAX_BATCH_SIZE_WITHOUT_WINDOW // parallel * parallel)
    window = given.get("batch_window_seconds", 1 if batch > MAX_BATCH_SIZE_WITHOUT_WINDOW else 0)
    sized = _sized(
        policy, given, parallel_calls=parallel, batch_size=batch, batch_window_seconds=window
    )
    # one scope busy for the timeout (its slots the slowest), the busiest for the memory: the
    # same plan unless an app-wide limit binds
    sized_plan = make_plan(sized, vendor)
    timeout: int | None = given.get("timeout_seconds")
    if timeout is None:
        timeout = min(LAMBDA_MAX_TIMEOUT_SECONDS, sized_plan.recommended_timeout_seconds)
    memory: int | None = given.get("memory_mb")
    if memory is None:
        memory = derived_memory(make_plan(sized, busiest) if app_wide else sized_plan)
    return ConsumerConfig.model_validate(
        {
            **sized.consumer.model_dump(exclude_unset=True),
            "timeout_seconds": timeout,
            "memory_mb": memory,
        }
    )


def derived_memory(plan: Plan, cpu_seconds_per_job: float = DEFAULT_CPU_SECONDS_PER_JOB) -> int:
    """The least memory whose CPU share carries the plan's rate on its environments at the
    plan's CPU per job (`planning.cpu`), in `MEMORY_STEP_MB` steps, at least
    `MIN_DERIVED_MEMORY_MB` and at most one vCPU's (more environments carry more beyond it)."""
    cpu = cpu_bound(
        plan.memory_mb, plan.environments, plan.target_rate_per_second, cpu_seconds_per_job
    )
    needed = math.ceil(cpu.needed_vcpu * MB_PER_VCPU / MEMORY_STEP_MB) * MEMORY_STEP_MB
    return max(MIN_DERIVED_MEMORY_MB, min(MB_PER_VCPU, needed))


def deployed_policy(policy: Policy) -> Policy:
    """The policy as synth deploys it: its consumer's sizing derived where it sets none, and
    marked as set, so that a function's environment (only what was set) carries it."""
    consumer = derived_consumer(policy)
    if consumer == policy.consumer:
        return policy
    return policy.model_copy(update={"consumer": consumer})


def deployed_config(config: SweeperConfig) -> SweeperConfig:
    """Every policy of the file as synth deploys it (`deployed_policy`)."""
    return SweeperConfig(policies=[deployed_policy(policy) for policy in config.policies])


def derived_fields(policy: Policy) -> dict[str, int]:
    """The figures of the policy's consumer that it leaves to the derivation, as derived (none
    when it states no latency)."""
    if policy.action.latency is None:
        return {}
    consumer = derived_consumer(policy)
    own = policy.consumer.model_fields_set
    return {name: getattr(consumer, name) for name in DERIVED_FIELDS if name not in own}


def _sized(policy: Policy, given: dict[str, Any], **sizes: int) -> Policy:
    """The policy with its consumer's set fields and these sizes (validated, so set)."""
    consumer = ConsumerConfig.model_validate({**given, **sizes})
    return policy.model_copy(update={"consumer": consumer})
