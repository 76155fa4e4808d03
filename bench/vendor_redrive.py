"""Target (j) of issue 43: a 60 s throttle, 300 jobs in flight, `max_receive_count = 2`.

The real pipeline on the local stack (producer, consumer and redrive handlers in worker
processes, SQS and DynamoDB on the stand-in, PostgreSQL) calls a vendor simulator that refuses
every call for THROTTLE_SECONDS (429, with Retry-After) from the moment the 300 jobs are
published. With `consumer.max_receive_count = 2` a record may wait once (a receive) and be
called once; the rest of the throttle sends it to the DLQ. The policy's redrive is
`automatic = "throttled"`, run by its schedule every minute as on AWS
(sweeper_local.redrive_runner; its first run FIRST_RUN_SECONDS into the throttle); no operator.

Three variants, one run each, in this order: the vendor's Retry-After says the throttle's time
left (`told`), or RETRY_AFTER_SHORT_SECONDS throughout, less than the throttle (`short`: sweeper
reopens and is refused again, as a vendor that underestimates its own incident makes it); and
`short` with today's schedule (`short_scheduled`: `automatic = "scheduled"`, a run every 15
minutes, its first as the others'), the comparison.

Figures: the dead letters (each job whose letter the redrive moved, and those left in the DLQ),
for each the seconds from the reopening (the vendor's end of the throttle) to its last return
to the work queue (the redrive's `dead letter moved` line, read from its log; 0 when it was back
before), the largest of them; every job final; the effects per object. Target: every dead
letter back within 10 s of the reopening, every job final, one effect per object.
"""

from __future__ import annotations

import json
import secrets
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from sweeper.config import (
    ConsumerConfig,
    HttpActionConfig,
    LimitConfig,
    Policy,
    Quota,
    ScopeConfig,
    ThrottleConfig,
)
from sweeper.config.redrive import AutomaticRedrive, RedriveConfig
from sweeper.limiter.gates import closed_gates
from sweeper.models import JobMessage, JobStatus
from sweeper_local.pipeline import LocalPipeline
from sweeper_local.redrive_runner import LocalRedrive
from sweeper_local.stack import LocalStack
from sweeper_local.vendor import VendorProcess

#: What (j) measures, as the vendor part lists it.
REOPENING = (
    "a 60 s throttle (429 with Retry-After) over 300 jobs, max_receive_count 2, the automatic "
    "redrive on: dead letters back after the reopening"
)
THROTTLE_SECONDS = 60
JOBS = 300
MAX_RECEIVE_COUNT = 2
#: The vendor's quota once the throttle is over, and its latency.
RATE_PER_SECOND = 50
VENDOR_LATENCY_SECONDS = 0.05
#: The `short` variant's Retry-After, said on every 429 of the throttle.
RETRY_AFTER_SHORT_SECONDS = 5
#: Each variant: the vendor's Retry-After (None: the time left) and the redrive's option.
VARIANTS: dict[str, tuple[int | None, AutomaticRedrive]] = {
    "told": (None, "throttled"),
    "short": (RETRY_AFTER_SHORT_SECONDS, "throttled"),
    "short_scheduled": (RETRY_AFTER_SHORT_SECONDS, "scheduled"),
}
#: The redrive's first run into the throttle; the next ones follow its schedule, as on AWS.
FIRST_RUN_SECONDS = 30.0
#: After the throttle, the run ends when every job is final, or after this long.
SETTLE_TIMEOUT_SECONDS = 90.0
BACK_WITHIN_SECONDS = 10.0
#: The redrive's line for each letter moved back (sweeper.redrive.run), and its time's format.
MOVED_MESSAGE = "dead letter moved"
POWERTOOLS_TIME_FORMAT = "%Y-%m-%d %H:%M:%S,%f%z"


def _policy(vendor_url: str, automatic: AutomaticRedrive) -> Policy:
    return Policy(
        name=f"redrive-{secrets.token_hex(3)}",
        limits=[
            LimitConfig(
                name="quota",
                key=ScopeConfig(kind="global").key_template,
                rate=Quota(limit=RATE_PER_SECOND, period_seconds=1.0),
            )
        ],
        action=HttpActionConfig(api_url=vendor_url, allow_plain_http=True, read_timeout_seconds=5),
        # 4 environments of 10 calls at once, as the vendor part's scenarios; two receives
        consumer=ConsumerConfig(
            reserved_concurrency=4,
            max_concurrency=4,
            batch_size=10,
            timeout_seconds=60,
            parallel_calls=10,
            max_receive_count=MAX_RECEIVE_COUNT,
        ),
        throttle=ThrottleConfig(reopen_jitter_seconds=0.05),
        redrive=RedriveConfig(automatic=automatic),
        lease_seconds=600,
    )


def moves(log_file: str) -> Iterator[tuple[str, float]]:
    """(operation key, epoch seconds) of each letter the redrive moved, from its log lines."""
    with open(log_file, encoding="utf-8") as lines:
        for line in lines:
            if MOVED_MESSAGE not in line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if record.get("message") == MOVED_MESSAGE:
                at = datetime.strptime(record["timestamp"], POWERTOOLS_TIME_FORMAT)
                yield str(record["operation_key"]), at.timestamp()


def back_figures(
    moved: list[tuple[str, float]], left: set[str], reopening: float
) -> dict[str, Any]:
    """Each dead letter's last return after the reopening (epoch seconds), the largest; a
    letter still in the DLQ (`left`, its keys) is not back."""
    last: dict[str, float] = {}
    for key, at in moved:
        last[key] = max(at, last.get(key, at))
    back = sorted(max(0.0, at - reopening) for key, at in last.items() if key not in left)
    return {
        "dead_letters": len(set(last) | left),
        "moves": len(moved),
        "moved_more_than_once": len(moved) - len(last),
        "left_in_dlq": len(left),
        "every_dead_letter_back": not left,
        "back_after_reopening_seconds_max": round(back[-1], 2) if back and not left else None,
        "back_after_reopening_seconds_p50": round(back[len(back) // 2], 2) if back else None,
        "moved_before_reopening": sum(1 for at in last.values() if at < reopening),
    }


def keys_left(sqs: Any, dlq_url: str) -> set[str]:
    """The operation keys of the letters in the DLQ at the end (each received once, hidden)."""
    keys: set[str] = set()
    while True:
        got = sqs.receive_message(QueueUrl=dlq_url, MaxNumberOfMessages=10, VisibilityTimeout=600)
        letters = got.get("Messages", [])
        if not letters:
            return keys
        keys.update(JobMessage.model_validate_json(m["Body"]).key for m in letters)


def run_variant(stack: LocalStack, variant: str) -> dict[str, Any]:
    """One throttle of THROTTLE_SECONDS with the variant's Retry-After; its figures."""
    retry_after, automatic = VARIANTS[variant]
    vendor = VendorProcess(
        *("--rate", f"{RATE_PER_SECOND}/1s", "--scope", "global"),
        *("--latency", str(VENDOR_LATENCY_SECONDS), "--seed", "7"),
    )
    redrive_log = tempfile.NamedTemporaryFile(  # noqa: SIM115 - kept to read
        prefix="sweeper-bench-redrive-", suffix=".log", delete=False
    ).name
    offset = time.time() - time.monotonic()  # one machine: the vendor's monotonic clock is ours
    try:
        policy = _policy(vendor.url, automatic)
        with LocalPipeline(
            stack,
            policy,
            extra_env={"POWERTOOLS_LOG_LEVEL": "WARNING"},
            prefix=f"bench-{policy.name}",
            log_prefix="sweeper-bench-redrive-",
            rehearsal_url=vendor.url,
        ) as run:
            # its line per letter moved is what the figures read
            redrive = LocalRedrive(
                policy,
                {**run.env, "POWERTOOLS_LOG_LEVEL": "INFO"},
                redrive_log,
                first_run_seconds=FIRST_RUN_SECONDS,
            )
            start, end = vendor.start_incident(THROTTLE_SECONDS, retry_after=retry_after)
            with redrive:
                run.seed(JOBS, tenants=10, spread_seconds=1)
                run.run(
                    lambda: run.ledger.counts(policy.name)[JobStatus.SUCCEEDED] >= JOBS,
                    timeout_seconds=THROTTLE_SECONDS + SETTLE_TIMEOUT_SECONDS,
                )
            finished = time.time()
            left = keys_left(stack.aws.sqs(), run.resources.dlq_url)
            # the scope's gate: its last closure's end stays on its item
            gates = closed_gates(stack.aws.dynamodb(), run.resources.limiter_table, 0.0)
        audit = vendor.audit()
    finally:
        vendor.stop()
    reopening = end + offset
    effects = list(audit.effects_by_key.values())
    counts = run.ledger_counts
    return {
        "variant": variant,
        "retry_after_seconds": retry_after if retry_after is not None else "time left",
        "automatic": automatic,
        "redrive_every_seconds": policy.redrive.period_seconds,
        **back_figures(list(moves(redrive_log)), left, reopening),
        "last_gate_reopening_after_throttle_seconds": max(
            (round(g.closed_until - reopening, 2) for g in gates if g.closed_until is not None),
            default=None,
        ),
        "redrive_runs": [
            {
                "after_throttle_start_seconds": round(at - (start + offset), 1),
                "moved": (report or {}).get("moved"),
                "kept_closed": (report or {}).get("kept_closed"),
                "waited_seconds": (report or {}).get("waited_seconds"),
                "stop_reason": (report or {}).get("stop_reason", error),
            }
            for at, report, error in redrive.runs
        ],
        "settled": counts.get(JobStatus.SUCCEEDED, 0) + counts.get(JobStatus.FAILED, 0),
        "succeeded": counts.get(JobStatus.SUCCEEDED, 0),
        "every_job_final": counts.get(JobStatus.SUCCEEDED, 0) + counts.get(JobStatus.FAILED, 0)
        == JOBS,
        "effects": sum(effects),
        "objects_with_an_effect": len(effects),
        "most_effects_on_one_object": max(effects, default=0),
        "calls": audit.calls_total,
        "responses_by_status": {str(k): v for k, v in audit.responses_by_status.items()},
        "all_final_after_reopening_seconds": round(finished - reopening, 1),
    }


def run_reopening(stack: LocalStack, options: Any = None) -> dict[str, Any]:
    """Target (j), a scenario of sweeper_bench.vendor's part: each variant once, on the part's
    stack (its length is the throttle's, not the part's `options`); figures and targets."""
    runs = [run_variant(stack, variant) for variant in VARIANTS]
    for figures in runs:
        print(  # stdout is --json's
            f"(j) {figures['variant']}: {figures['dead_letters']} dead letters, back within "
            f"{figures['back_after_reopening_seconds_max']} s of the reopening (target <= "
            f"{BACK_WITHIN_SECONDS:g}); {figures['settled']}/{JOBS} final; at most "
            f"{figures['most_effects_on_one_object']} effect per object",
            file=sys.stderr,
        )
    return {
        "scenario": "j",
        "what": REOPENING,
        "throttle_seconds": THROTTLE_SECONDS,
        "jobs": JOBS,
        "max_receive_count": MAX_RECEIVE_COUNT,
        "back_after_reopening_seconds_max": {
            r["variant"]: r["back_after_reopening_seconds_max"] for r in runs
        },
        "dead_letters": {r["variant"]: r["dead_letters"] for r in runs},
        "targets": {
            "back_after_reopening_seconds_max": BACK_WITHIN_SECONDS,
            "every_job_final": True,
            "most_effects_on_one_object": 1,
        },
        "runs": runs,
    }
