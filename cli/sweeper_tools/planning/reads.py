"""DynamoDB read units a policy costs, from the rules its functions follow (not a guess).

Every read here is a strongly consistent GetItem (or a BatchGetItem's item) of a limiter-table
item of a few hundred bytes: one read unit (up to 4 KB each).

Per job, the consumer's calls (a job is one call, as the writes are counted):
- a learned scope (`learn`, sweeper.admission.learned): the last look, its scope's item read
  just before every call goes;
- each further limit with no rate that a 429 can name (sweeper.admission.limit_gates): its gate
  is read before a call that no look of its batch covers, at most once a call.
A told scope reads nothing a job by rule: its reservations are conditional writes on its gate.
Not priced, for want of a rule: the look again at the gate of a slot further than
GATE_RECHECK_LEAD_SECONDS away (one a lead for the batch's calls it covers), several limits'
looks and a cap's lease reads; `sweeper bench rate` measures 0.27-0.90 reads a job with one
limit (docs/benchmarks.md), more with a cap.

Per month at rest, the scheduled runs: the producer reads its wake item every run and the latest
closure's marker (`closures#latest`) before each page it claims; counted at most, both every run
(a run with nothing due connects and pages only every trust bound). A draining run's further
pages read the marker once each, a thousandth of a read a job at the default page size: not
counted. The watching redrive (`automatic = "throttled"`) reads the marker on each run that
finds its DLQ empty (every run at rest); the scheduled one reads no item. A closure makes these
readers Scan the table until it ends: an incident's cost, not priced.
"""

from __future__ import annotations

from sweeper.admission.learned import learned_limit
from sweeper.admission.limit_gates import unreserved_gates
from sweeper.config import Policy
from sweeper_tools.deploy.redrive import redrive_schedule
from sweeper_tools.planning.pause import runs_per_month

#: The last look of a learned scope: one item read before every call.
LAST_LOOK_READS_PER_CALL = 1.0
#: A named gate with no rate: its item read before a call, at most once a call.
NAMED_GATE_READS_PER_CALL = 1.0
#: A producer run: its wake item and the latest closure's marker.
PRODUCER_READS_PER_RUN = 2.0
#: A watching redrive's run on an empty DLQ: the marker.
WATCHING_REDRIVE_READS_PER_RUN = 1.0


def dynamodb_reads_per_job(policy: Policy) -> float:
    """Read units a job costs at most, by the rules above."""
    last_look = LAST_LOOK_READS_PER_CALL if learned_limit(policy) is not None else 0.0
    return last_look + NAMED_GATE_READS_PER_CALL * len(unreserved_gates(policy))


def reads_at_rest_per_month(policy: Policy) -> float:
    """Read units a month of the policy's scheduled runs with nothing to do, at most."""
    reads = PRODUCER_READS_PER_RUN * runs_per_month(policy.schedule, policy.timezone)
    if policy.redrive.watches:
        runs = runs_per_month(redrive_schedule(policy.redrive))
        reads += WATCHING_REDRIVE_READS_PER_RUN * runs
    return reads
