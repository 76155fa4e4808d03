"""The ways obligations come in, for `sweeper demo --source`: each door puts a share of the
demo's obligations where its source lives and brings them into the ledger by the production
path. Add a door by adding an entry to `DOORS`.

- sql: rows in the system-of-record database of the local cluster (a database of its own),
  found by a discovery pass of the sql source (keyset pages, persisted cursor).
- s3: objects in a bucket of the AWS emulator, found by a discovery pass of the s3 source.
- webhook: hints posted, signed, to the webhook on loopback; it puts them on the intake queue
  and the intake function upserts them.
- file: a file of obligations sent through the intake queue, as `sweeper schedule --stack` does.

The hint doors need the stack's intake (`LocalStack.webhook_url` and `intake_queue_urls`) and
count what the ledger gained while they waited for it, as an operator would.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from sweeper.config import Policy, S3Discovery, SqlDiscovery
from sweeper.discovery.run import COMPLETE, DiscoveryReport, run_discovery
from sweeper.discovery.s3 import S3Source
from sweeper.discovery.sql import SqlSource
from sweeper.discovery.store import DiscoveryStore
from sweeper.intake.send import send_hints
from sweeper.ledger.store import Ledger
from sweeper.models import NewJob
from sweeper.sqs_queue import SqsPublisher
from sweeper_local.errors import LocalStackError
from sweeper_local.sources import (
    BUCKET_PREFIX,
    KEY_TEMPLATE,
    SOURCE_DATABASE,
    SOURCE_QUERY,
    seed_bucket,
    seed_source,
    source_database,
)
from sweeper_local.stack import LocalStack
from sweeper_local.webhook import post_signed

#: A discovery run's budget in the demo; a pass that needs more continues in the next run.
DEMO_DISCOVERY_BUDGET_SECONDS = 30.0
#: Objects written to the bucket that no key template matches: rejected by position.
DEMO_STRAY_KEYS = ("exports/README", "exports/tenant-0/nested/not-an-export")
#: Hints per webhook request in the demo (a request may carry up to the policy's limit).
DEMO_HINTS_PER_REQUEST = 100
#: How long a hint door waits for the intake function to have put every hint in the ledger.
HINT_ARRIVAL_TIMEOUT_SECONDS = 120.0


@dataclass(frozen=True)
class DoorReport:
    """How many obligations came in by one door, and what its source held besides."""

    door: str
    seeded: int
    brought_in: int  # inserted into the ledger
    rejected: int
    not_due: int
    runs: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class Door(Protocol):
    name: str

    def feed(
        self, stack: LocalStack, policy: Policy, ledger: Ledger, count: int, tenants: int
    ) -> DoorReport:
        """Put `count` obligations where this door's source is and bring them in."""
        ...


def _discover_all(
    policy: Policy, source: Any, ledger: Ledger, *, budget: float = DEMO_DISCOVERY_BUDGET_SECONDS
) -> list[DiscoveryReport]:
    """Discovery runs until a pass completes (each run its own scheduled time)."""
    reports: list[DiscoveryReport] = []
    store = DiscoveryStore(ledger)
    while not reports or reports[-1].stop_reason != COMPLETE:
        reports.append(
            run_discovery(
                policy,
                source,
                store,
                scheduled_at=datetime.now(UTC),
                clock=lambda: datetime.now(UTC),
                remaining_seconds=_budget(budget),
            )
        )
    return reports


def _budget(seconds: float) -> Callable[[], float]:
    started = time.monotonic()
    return lambda: seconds - (time.monotonic() - started)


def _report(door: str, seeded: int, runs: list[DiscoveryReport]) -> DoorReport:
    return DoorReport(
        door=door,
        seeded=seeded,
        brought_in=sum(r.inserted for r in runs),
        rejected=sum(r.rejected for r in runs),
        not_due=sum(r.not_due for r in runs),
        runs=len(runs),
    )


#: What the sql door's rows give each identity param of the policy: the row's due date, as an
#: ISO date (a date column reaches discovery as its ISO text), e.g. the payments example's
#: `business_date`. Every other param the policy's params_schema requires gets a sample value of
#: its type (`sample_literal`), e.g. the refunds example's `amount`. A policy whose params need
#: other values is refused at the door, and the demo reports what was refused.
IDENTITY_COLUMN = "(expires_at AT TIME ZONE 'UTC')::date AS {name}"


def sample_literal(schema: object) -> str | None:
    """A SQL literal that a JSON Schema property of a simple type accepts (the first of its enum,
    its minimum, or a plain value), or None when the demo cannot make one up."""
    if not isinstance(schema, dict):
        return None
    enum = schema.get("enum")
    if isinstance(enum, list) and enum and isinstance(enum[0], str | int | bool):
        return _literal(enum[0])
    kind = schema.get("type")
    if kind in ("integer", "number"):
        low = schema.get("minimum", schema.get("exclusiveMinimum", 0))
        if not isinstance(low, int | float):
            return None
        value = max(1, math.floor(low) + 1 if "exclusiveMinimum" in schema else math.ceil(low))
        high = schema.get("maximum", schema.get("exclusiveMaximum"))
        if isinstance(high, int | float) and (
            value > high or (value == high and "maximum" not in schema)
        ):
            return None  # no sample within its bounds: the door refuses, and the demo says so
        return str(value)
    if kind == "boolean":
        return "true"
    plain = not {"pattern", "format", "minLength", "maxLength"} & schema.keys()
    if kind == "string" and plain:
        return _literal("demo")
    return None


def _literal(value: str | int | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return "'" + value.replace("'", "''") + "'"


def identity_query(policy: Policy) -> tuple[str, tuple[str, ...]]:
    """The sql door's discovery query and its param columns: one per identity param, and one per
    other required param the demo can make a value for (their names are plain identifiers,
    checked by the policy's model; names it cannot are left out, and the door refuses)."""
    columns = [IDENTITY_COLUMN.format(name=name) for name in policy.identity_params]
    names = list(policy.identity_params)
    schema = policy.params_schema or {}
    properties = schema.get("properties", {})
    for name in schema.get("required", []):
        literal = sample_literal(properties.get(name))
        if name in names or literal is None or not str(name).isidentifier():
            continue
        columns.append(f"{literal} AS {name}")
        names.append(str(name))
    if not names:
        return SOURCE_QUERY, ()
    select, sep, rest = SOURCE_QUERY.partition(" FROM exports")
    if not sep:
        raise LocalStackError("the sql door's query has no ` FROM exports` to add columns before")
    return select + "".join(", " + c for c in columns) + sep + rest, tuple(names)


class SqlDoor:
    name = "sql"

    def feed(
        self, stack: LocalStack, policy: Policy, ledger: Ledger, count: int, tenants: int
    ) -> DoorReport:
        assert stack.database_url is not None
        # A database of its own in the ledger's cluster, one per demo policy (runs never share).
        name = f"{SOURCE_DATABASE}_{policy.name.replace('-', '_')}"
        url = stack.source_database_url or source_database(stack.database_url, name)
        seed_source(url, count, tenants, datetime.now(UTC) - timedelta(minutes=1))
        query, columns = identity_query(policy)
        config = SqlDiscovery(query=query, page_size=1000, param_columns=list(columns))
        source = SqlSource(config, url)
        try:
            runs = _discover_all(policy.model_copy(update={"discovery": config}), source, ledger)
        finally:
            source.close()
        return _report(self.name, count, runs)


class S3Door:
    name = "s3"

    def feed(
        self, stack: LocalStack, policy: Policy, ledger: Ledger, count: int, tenants: int
    ) -> DoorReport:
        s3 = stack.aws.s3()
        bucket = stack.source_bucket
        seed_bucket(s3, bucket, count, tenants)
        for key in DEMO_STRAY_KEYS:
            s3.put_object(Bucket=bucket, Key=key, Body=b"")
        # The emulator stamps every object "now": a one-second age rule makes the demo's
        # objects due at once or a second later (the ledger holds the young ones until due).
        config = S3Discovery(
            bucket=bucket,
            prefix=BUCKET_PREFIX,
            key_template=KEY_TEMPLATE,
            min_age_seconds=1,
            lookahead_seconds=1,
            page_size=1000,
        )
        runs = _discover_all(
            policy.model_copy(update={"discovery": config}), S3Source(config, s3), ledger
        )
        return _report(self.name, count, runs)


def _hints(door: str, count: int, tenants: int) -> list[NewJob]:
    due = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=1)
    return [NewJob(f"tenant-{n % tenants}", f"{door}-{n:09d}", due) for n in range(count)]


def _held(ledger: Ledger, policy: Policy) -> int:
    return sum(ledger.counts(policy.name).values())


def _wait_for_ledger(ledger: Ledger, policy: Policy, expected: int, door: str) -> int:
    """Poll until the ledger holds `expected` jobs of the policy; how many it holds."""
    deadline = time.monotonic() + HINT_ARRIVAL_TIMEOUT_SECONDS
    held = _held(ledger, policy)
    while held < expected and time.monotonic() < deadline:
        time.sleep(0.2)
        held = _held(ledger, policy)
    if held < expected:
        raise LocalStackError(
            f"the {door} door's hints did not all reach the ledger within "
            f"{HINT_ARRIVAL_TIMEOUT_SECONDS:.0f} s ({expected - held} missing; see the log file)"
        )
    return held


def _chunks(jobs: list[NewJob], size: int) -> list[list[NewJob]]:
    return [jobs[i : i + size] for i in range(0, len(jobs), size)]


def _hint_body(jobs: Sequence[NewJob]) -> list[dict[str, str]]:
    return [
        {"tenant_id": j.tenant_id, "object_id": j.object_id, "due_at": j.due_at.isoformat()}
        for j in jobs
    ]


class WebhookDoor:
    name = "webhook"

    def feed(
        self, stack: LocalStack, policy: Policy, ledger: Ledger, count: int, tenants: int
    ) -> DoorReport:
        if stack.webhook_url is None or stack.webhook_secret is None:
            raise LocalStackError("the webhook door needs the local stack's intake running")
        before = _held(ledger, policy)
        requests = _chunks(_hints(self.name, count, tenants), DEMO_HINTS_PER_REQUEST)
        for chunk in requests:
            status, body = post_signed(
                stack.webhook_url, policy.name, stack.webhook_secret, _hint_body(chunk)
            )
            if status != 202:
                raise LocalStackError(
                    f"the local webhook answered {status} ({body.get('error')}) to the demo"
                )
        held = _wait_for_ledger(ledger, policy, before + count, self.name)
        return DoorReport(self.name, count, held - before, 0, 0, len(requests))


class FileDoor:
    name = "file"

    def feed(
        self, stack: LocalStack, policy: Policy, ledger: Ledger, count: int, tenants: int
    ) -> DoorReport:
        queue_url = stack.intake_queue_urls.get(policy.name)
        if queue_url is None:
            raise LocalStackError("the file door needs the local stack's intake running")
        before = _held(ledger, policy)
        jobs = _hints(self.name, count, tenants)
        if jobs:
            send_hints(SqsPublisher(stack.aws.sqs(), queue_url), policy.name, "file", jobs)
        held = _wait_for_ledger(ledger, policy, before + count, self.name)
        return DoorReport(self.name, count, held - before, 0, 0, 1 if jobs else 0)


DOORS: dict[str, Door] = {
    door.name: door for door in (SqlDoor(), S3Door(), WebhookDoor(), FileDoor())
}


def split(total: int, doors: list[str]) -> dict[str, int]:
    """`total` obligations shared among `doors` as evenly as whole numbers allow."""
    share, extra = divmod(total, len(doors))
    return {door: share + (1 if i < extra else 0) for i, door in enumerate(doors)}


def feed_doors(
    stack: LocalStack,
    policy: Policy,
    ledger: Ledger,
    doors: list[str],
    total: int,
    tenants: int,
    on_door: Callable[[DoorReport], None] | None = None,
) -> list[DoorReport]:
    reports = []
    for door, count in split(total, doors).items():
        report = DOORS[door].feed(stack, policy, ledger, count, tenants)
        reports.append(report)
        if on_door is not None:
            on_door(report)
    return reports
