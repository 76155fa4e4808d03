"""DynamoDB read units a policy costs, from the rules its functions follow (not a guess).

Every read here is a GetItem (or a BatchGetItem's item) of a limiter-table item of a few hundred
bytes: one read unit strongly consistent, half a unit eventually consistent (a lease's look).

Per job, the consumer's calls (a job is one call, as the writes are counted), for an environment
making `c` calls a second of one key of a limit (the throughput over the environments and the
keys busy at once):
- the rate that binds, told or learned (sweeper.admission.rate, composed.py): its calls wait
  for their slots, which run ahead of the write that granted them. A call whose slot comes more
  than GATE_RECHECK_LEAD_SECONDS after its batch's last look at the key's open gate reads the
  gate GATE_READ_LEAD_SECONDS before its slot, and that look covers the batch's slots of the key
  within the rest of the lead after it: one read serves `1 + c x (lead - read lead)` calls (a
  batch with several keys reads theirs in one request: fewer requests, the same units). A rate
  that does not bind grants its slots within the lead of the write that took them, a look that
  covers them: no read. Paired limits (a store's rate under one app-wide rate,
  sweeper.admission.pairing) keep every key's gate on the app's item: one read of it covers the
  batch's calls of every key, at the environment's whole rate, when either binds. With several
  keys a batch, more is read than this (a look in flight while another thread's look reads the
  same key; a slot let go late looked at again): bench (d), ten keys, measured 1.23-1.33 units
  a job on a saturated machine against 0.97 here;
- a learned rate (`learn`, sweeper.admission.learned): beside its looks, the last look, its
  key's item read just before every call goes;
- each further limit with no rate that a 429 can name (sweeper.admission.limit_gates): its gate
  read before a call its batch's last look (GATE_RECHECK_LEAD_SECONDS old at most) does not
  cover, one read for `1 + c x lead` calls;
- a concurrency cap (`max_in_flight`, sweeper.admission.concurrency): a call not handed a lease
  by its batch looks at the cap's item before taking one (half a unit); while the cap binds, a
  batch waiting for a lease looks at most every LEASE_POLL_HOLDING_SECONDS (it holds leases
  its calls hand on), and with a slack on the rate one waiter keeps the batch's gate look fresh
  every LOOK_KEPT_FRESH_SECONDS, a read a call's lease then needs none of;
- the operators' live limits (sweeper.limiter.live): each environment reads its policy's live
  items, one unit a limit, at most once per LIVE_READ_SECONDS while it calls;
- a budget reads nothing a call: its unit is a conditional write on the item as last seen.

Per month at rest, the scheduled runs: the producer reads its wake item every run and the latest
closure's marker (`closures#latest`) before each page it claims; counted at most, both every run
(a run with nothing due connects and pages only every trust bound). A draining run's further
pages read the marker once each, a thousandth of a read a job at the default page size: not
counted. The watching redrive (`automatic = "throttled"`) reads the marker on each run that
finds its DLQ empty (every run at rest); the scheduled one reads no item. A closure makes these
readers Scan the table until it ends: an incident's cost, not priced.
"""

from __future__ import annotations

from collections.abc import Mapping

from sweeper.admission.base import GATE_RECHECK_LEAD_SECONDS
from sweeper.admission.learned import learned_limit
from sweeper.admission.limit_gates import unreserved_gates
from sweeper.admission.pairing import PairedLimits
from sweeper.config import Policy
from sweeper.limiter.live import LIVE_READ_SECONDS
from sweeper_tools.deploy.redrive import redrive_schedule
from sweeper_tools.planning.pause import runs_per_month
from sweeper_tools.planning.regimes import Looks, planning_of
from sweeper_tools.planning.regimes.base import per_look
from sweeper_tools.planning.regimes.rate import RATE_BINDS

#: The last look of a learned scope: one item read before every call.
LAST_LOOK_READS_PER_CALL = 1.0
#: A producer run: its wake item and the latest closure's marker.
PRODUCER_READS_PER_RUN = 2.0
#: A watching redrive's run on an empty DLQ: the marker.
WATCHING_REDRIVE_READS_PER_RUN = 1.0


def gate_reads_per_job(
    policy: Policy,
    per_environment: float,
    keys: Mapping[str, int],
    binding: str | None,
    binding_by: str = RATE_BINDS,
) -> float:
    """Read units a call's looks at its limits' gates and leases cost (the rules above);
    `per_environment`: the calls a second one environment makes, `binding`: the limit whose
    keys run at their ceiling (its calls wait for their slots, or leases), by its regime
    `binding_by` (`LimitCeiling.bound`, the regime's `PlanTerm.bound`). Each limit's regimes
    price their own looks (`LimitPlanning.look_reads`), asked alike whatever they are."""
    paired = PairedLimits.wanted(policy) is not None
    fresh = policy.quota.slack_seconds > 0
    unreserved = unreserved_gates(policy)
    reads = 0.0
    for limit in policy.limits:
        per_key = per_environment / keys.get(limit.name, 1)
        if limit.name in unreserved:
            reads += per_look(per_key, GATE_RECHECK_LEAD_SECONDS)
        binds_by = binding_by if limit.name == binding else None
        looks = Looks(per_environment, per_key, binds_by, paired, fresh)
        reads += planning_of(limit).look_reads(looks)
    return reads


def dynamodb_reads_per_job(
    policy: Policy,
    *,
    environments: int,
    throughput: float,
    keys: Mapping[str, int] | None = None,
    binding: str | None = None,
    binding_by: str = RATE_BINDS,
) -> float:
    """Read units a job costs at most, by the rules above, `environments` calling `throughput`
    jobs a second in all; `keys`: each limit's keys busy at once (default one), `binding`: the
    limit that binds (`Plan.binding`; "consumers" or None: none runs at its ceiling) and by
    which of its regimes."""
    per_environment = throughput / max(1, environments)
    live = len(policy.limits) * min(1.0, 1.0 / (LIVE_READ_SECONDS * max(per_environment, 1e-9)))
    last_look = LAST_LOOK_READS_PER_CALL if learned_limit(policy) is not None else 0.0
    gates = gate_reads_per_job(policy, per_environment, keys or {}, binding, binding_by)
    return live + last_look + gates


def reads_at_rest_per_month(policy: Policy) -> float:
    """Read units a month of the policy's scheduled runs with nothing to do, at most."""
    reads = PRODUCER_READS_PER_RUN * runs_per_month(policy.schedule, policy.timezone)
    if policy.redrive.watches:
        runs = runs_per_month(redrive_schedule(policy.redrive))
        reads += WATCHING_REDRIVE_READS_PER_RUN * runs
    return reads
