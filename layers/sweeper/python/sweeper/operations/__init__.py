"""The operator's console: status, pause and resume, catch-up, inspect, retry, job control.

Plain logic over the ledger and small adapters, shared by `sweeper` (the CLI), the operator
API and the local stack. Every action that changes something is recorded in the ledger with
who did it. One room per concern:

- `status`: where a policy stands (counts, ages, queues, gates, closed limits, last runs);
- `pause`: pause and resume;
- `missed`: the scheduled runs missed, and catching them up;
- `jobs`: inspect, retry and job control (cancel, hold, unhold, postpone);
- `page`: the console page's activity, search and one job's history.
"""

from __future__ import annotations

from sweeper.operations.jobs import control_jobs, inspect_jobs, retry_jobs
from sweeper.operations.page import activity, job_history, search_jobs
from sweeper.operations.pause import pause_policy, resume_policy
from sweeper.operations.status import policy_status

#: Those imported from more than one place; the rest from their room.
__all__ = [
    "activity",
    "control_jobs",
    "inspect_jobs",
    "job_history",
    "pause_policy",
    "policy_status",
    "resume_policy",
    "retry_jobs",
    "search_jobs",
]
