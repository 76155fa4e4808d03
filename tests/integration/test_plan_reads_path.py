"""The plan's DynamoDB reads a job, against the reads the consumer's real path makes.

One batch of a told policy (no `learn`) runs in one environment on the local stand-in, which
counts every read request and, for a BatchGetItem, every key it reads (what AWS bills); the
reads a job it counted are compared with what `sweeper_tools.planning.reads` says one
environment at that rate reads.
"""

from __future__ import annotations

import math
import time
from typing import Any

import pytest

from sweeper import runtime
from sweeper.config import Policy, Quota, ScopeConfig
from sweeper.limiter.live import LIVE_READ_SECONDS
from sweeper.models import JobStatus
from sweeper_local.lite_aws import KEYS_READ
from sweeper_tools.planning.reads import dynamodb_reads_per_job, gate_reads_per_job
from tests.conftest import Pipeline
from tests.integration.test_consumer import failed_ids, publish_all
from tests.integration.test_parallel_calls import invoke

pytestmark = pytest.mark.integration

#: Jobs in the batch: about 3 s at the rate below, long enough for the reads a second
#: (the live limits') to show beside the reads a call (the gate's looks).
JOBS = 60
#: One key at 20 calls/s, all of it used: the batch is paced by the rate, not by its calls.
RATE = 20
#: The rule is at most: a block's reservation is a look too, and covers the slots it grants
#: within the lead, which the rule leaves out. Measured here: 25-30 looks for the 60 jobs
#: against the rule's 30.4, and 3 live reads; so the reads a job are within the rule less
#: BELOW_THE_RULE (9 reads of the 60) and ABOVE_THE_RULE (3, a look's timing).
BELOW_THE_RULE = 0.15
ABOVE_THE_RULE = 0.05

READS = ("GetItem", "Scan", "Query")


def _read_units(requests: dict[str, int]) -> int:
    """DynamoDB read units in `requests` (the stand-in's counts): a request each, a
    BatchGetItem's keys each."""
    units = sum(requests.get(f"dynamodb:{operation}", 0) for operation in READS)
    return units + requests.get(f"dynamodb:BatchGetItem{KEYS_READ}", 0)


def _told(p: Pipeline, monkeypatch: pytest.MonkeyPatch) -> Policy:
    """The pipeline's policy with one told rate on one key, four calls at once."""
    data: dict[str, Any] = p.policy.model_dump(exclude={"quota", "scope", "limits"})
    data["quota"] = Quota(limit=RATE, period_seconds=1, headroom=1.0)
    data["scope"] = ScopeConfig(kind="global")
    data["consumer"]["parallel_calls"] = 4
    policy = Policy.model_validate(data)
    monkeypatch.setenv("SWEEPER_POLICY", policy.model_dump_json())
    runtime.reset()
    return policy


def test_a_told_policys_reads_a_job_are_within_the_plans_rule(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a told policy's batch of JOBS jobs on one key
    policy = _told(pipeline, monkeypatch)
    pipeline.seed(JOBS, tenants=1)
    records = publish_all(pipeline)
    assert len(records) == JOBS
    before = pipeline.aws.requests()
    assert before is not None, "the stand-in counts the requests"
    # When one environment calls them all
    started = time.monotonic()
    response = invoke(pipeline, records)
    took = time.monotonic() - started
    after = pipeline.aws.requests()
    assert after is not None
    assert failed_ids(response) == set()
    assert pipeline.ledger.counts(policy.name)[JobStatus.SUCCEEDED] == JOBS
    # Then the reads it made a job are what the plan's rules say of one environment at the
    # rate it ran at (the rate binds: every call waits for its slot)
    spent = {key: n - before.get(key, 0) for key, n in after.items()}
    rate = JOBS / took
    name = policy.limits[0].name
    # the gate's looks (GetItem), one for the call that makes it and the calls within the rest
    # of the lead after it
    looks = spent.get("dynamodb:GetItem", 0) / JOBS
    rule = gate_reads_per_job(policy, rate, {}, name)
    assert rule - BELOW_THE_RULE <= looks <= rule + ABOVE_THE_RULE, (looks, rule)
    # the live limits (BatchGetItem, a key each), once a second at most
    live = spent.get(f"dynamodb:BatchGetItem{KEYS_READ}", 0)
    assert 1 <= live <= len(policy.limits) * math.ceil(took / LIVE_READ_SECONDS)
    # and in all, what the plan prices for one environment at that rate
    planned = dynamodb_reads_per_job(policy, environments=1, throughput=rate, binding=name)
    measured = _read_units(spent) / JOBS
    assert planned - BELOW_THE_RULE <= measured <= planned + ABOVE_THE_RULE, (measured, planned)
