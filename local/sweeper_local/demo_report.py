"""What a demo is asked (`DemoOptions`) and what it reports (`DemoReport`), with the one line
that says why a demo fell short."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sweeper.config import Policy, Quota
from sweeper_local.doors import DoorReport


@dataclass(frozen=True)
class DemoOptions:
    jobs: int = 500
    tenants: int = 5
    consumers: int = 4
    #: None: picked from the rate and the measured latency, as `sweeper plan` would.
    batch_size: int | None = None
    parallel_calls: int | None = None
    #: A team's own policy (`--config FILE --policy P`): run as it is, its action pointed at
    #: the simulator or `api_url`; None: the demo's own policy, planned from `rate`.
    policy: Policy | None = None
    database_url: str | None = None
    api_url: str | None = None
    rate: Quota | None = None
    timeout_seconds: float = 300.0
    #: The doors obligations come in by (sweeper_local.doors), sharing `jobs`; none: the
    #: obligations are scheduled straight into the ledger.
    sources: tuple[str, ...] = ()
    #: Where to write the demo stack's endpoints while it runs (as `local up` does), so that
    #: the console commands and a sender reach it; removed at the end. None: not written.
    local_file: Path | None = None
    #: Hold each consumer environment to the CPU share Lambda gives its memory (the rate bench's).
    cap_consumer_cpu: bool = False


@dataclass(frozen=True)
class DemoReport:
    policy: str
    jobs: int
    discovered: int
    published: int
    consumed: int
    acknowledged: int  # deliveries whose message the event source deleted
    returned: int  # deliveries sent back to the queue (a wait, a retry, a function error)
    succeeded: int
    terminal: int
    pending: int
    duplicates: int
    retries: int
    throttle_events: int
    gate_deferrals: int
    limiter_waits: int
    leases_reclaimed: int
    released: int
    publish_failures: int
    vendor_calls: int | None
    vendor_effects: int | None
    vendor_429s: int | None
    idempotency_keys: int | None
    max_keys_per_object: int | None
    oldest_eligible_age_seconds: float
    producer_runs: int
    consumer_invocations: int
    elapsed_seconds: float
    all_final: bool
    log_file: str
    #: What the consumers ran with, and the latency measured before (None: not measured).
    parallel_calls: int = 1
    batch_size: int = 10
    latency_p50_seconds: float | None = None
    latency_p95_seconds: float | None = None
    #: The share of the quota the vendor saw used, from its audit (None without one): the
    #: demo's calls over the quota's rate across the span of their arrivals.
    vendor_utilization: float | None = None
    #: Jobs settled per second from the first settlement to the last (the ledger's completion
    #: times; None with fewer than two): what the pipeline carried, measured from its end.
    settled_per_second: float | None = None
    #: SQS and DynamoDB requests per job of the run, by `service:Operation` (None: moto).
    aws_requests_per_job: dict[str, float] | None = None
    #: Per door: how many obligations came in by it (and what its source held besides).
    doors: list[dict[str, Any]] = field(default_factory=list)
    #: The local file written while the demo ran, or None (not asked, or another stack's).
    local_file: str | None = None
    #: The most effects the vendor's audit saw for one object of this run (1: once each).
    max_effects_per_object: int | None = None
    #: Obligations the doors were given that never reached the ledger (refused: e.g. params
    #: the policy requires that the door's rows do not carry), and how many the ledger held
    #: once the doors were done. Either short of `jobs`: the demo is not final (`problem`).
    refused: int = 0
    in_ledger: int | None = None
    #: The largest peak resident memory a consumer environment reported, MiB (0: none), and
    #: the consumers' CPU per job (their invocations' CPU time over the jobs in the ledger).
    consumer_max_rss_mb: float = 0.0
    consumer_cpu_ms_per_job: float = 0.0

    def problem(self) -> str | None:
        """What made the demo fall short, as one actionable line (None: every job final)."""
        return demo_problem(self.jobs, self.refused, self.in_ledger, self.pending, self.log_file)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def refused_at_doors(doors: list[DoorReport]) -> int:
    """Obligations a door seeded that it did not bring into the ledger (its source's strays,
    which are no obligations of the demo's, are not counted)."""
    return sum(max(0, door.seeded - door.brought_in) for door in doors)


def demo_problem(
    jobs: int, refused: int, in_ledger: int | None, pending: int, log_file: str
) -> str | None:
    """Why a demo is not final, in one actionable line; None when every job it was asked for
    reached the ledger and settled."""
    if refused:
        return (
            f"{refused} of {jobs} obligations were refused at the doors (the policy's params or "
            f"identity params, which the demo's doors may not carry): see the doors' table "
            f"and {log_file}"
        )
    if in_ledger is not None and in_ledger < jobs:
        return (
            f"only {in_ledger} of {jobs} obligations reached the ledger: see the doors' table "
            f"and {log_file}"
        )
    if pending:
        return (
            f"{pending} of {jobs} obligations were still pending at the timeout: give a longer "
            f"--timeout, or see {log_file}"
        )
    return None
