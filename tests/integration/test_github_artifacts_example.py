"""docs/examples/github-artifacts.toml end to end on the local stack (issue 43, point 7).

The policy file as shipped, on the stack `sweeper local up --config
docs/examples/github-artifacts.toml --api-url URL` runs: GitHub is the vendor simulator as a
process of its own (`python -m sweeper_local.vendor --dialect github`), each owner's
installation token given for its secret's ARN as `local up` takes it from
SWEEPER_LOCAL_SECRETS. GitHub states a primary limit of 5,000 calls an hour per owner in
`x-ratelimit-*` (epoch resets): sweeper is told at most 15,000/h and learns 5,000 from the
first answer. Its secondary limit charges 5 points a DELETE against 900 a minute. The rule
these tests hold: no answer refused by either limit that sweeper caused (a 403 injected by the
test is not one), and every artifact deleted exactly once.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from sweeper.config import Policy
from sweeper.ledger.store import Ledger
from sweeper.limiter import DynamoLimiter
from sweeper.limiter.keys import SCOPE_KEY_PREFIX
from sweeper.models import Job, JobStatus, NewJob, OutcomeClass, operation_key
from sweeper.scheduling import schedule_jobs
from sweeper_local.background import LocalConsoleStack
from sweeper_local.github_artifacts import GithubAudit
from sweeper_local.vendor import VendorProcess
from sweeper_tools.policy_file import load_config
from tests.conftest import PgServer
from tests.integration.examples import example_against, tenant_secrets, wait_for
from tests.integration.examples import final_jobs as _final

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).parents[2] / "docs" / "examples" / "github-artifacts.toml"
DEADLINE_SECONDS = 60.0
#: GitHub's primary limit for an installation, as the simulator states it: less than the
#: example's told ceiling (15,000/h), so the pace sweeper holds is the learned one.
CORE = (5000, 3600.0)
OWNERS = ("octo-org", "hubot", "mona", "acme-corp")
#: An owner whose installation another client of the team's has nearly spent.
SPENT_OWNER, LEFT = "spent-org", 3
#: How long after a call's arrival another already on its way may still arrive.
IN_FLIGHT_SECONDS = 0.4
REPO = "ci-builds"
#: Each owner's last calls, paced at the learned rate.
PACED_CALLS = 4
#: The Retry-After of an injected secondary 403, and the part of it in which nothing of that
#: owner may arrive (from after the calls in flight when it was answered, to a margin before
#: its end).
RETRY_AFTER_SECONDS = 3
QUIET = (1.0, RETRY_AFTER_SECONDS - 0.4)
_databases = itertools.count()


@dataclass
class Github:
    stack: LocalConsoleStack
    api: VendorProcess

    @property
    def policy(self) -> Policy:
        return self.stack.policies["github-artifacts"].policy

    def audit(self) -> GithubAudit:
        return self.api.github_audit()

    def limiter_items(self) -> list[dict[str, Any]]:
        table = self.stack.policies["github-artifacts"].resources.limiter_table
        scan = self.stack.stack.aws.dynamodb().scan(TableName=table)
        return [i for i in scan["Items"] if i["pk"]["S"].startswith(SCOPE_KEY_PREFIX)]


@pytest.fixture(scope="module")
def github(pg_server: PgServer, pg_template: str) -> Iterator[Github]:
    config = load_config(EXAMPLE)
    # an installation token per owner
    tokens = tenant_secrets(config.policies[0], (*OWNERS, SPENT_OWNER), "ghs_")
    api = VendorProcess("--dialect", "github", "--github-core", f"{CORE[0]}/{int(CORE[1])}s")
    name = f"sweeper_github_{next(_databases)}"
    databases = (pg_server, pg_template, name)
    with example_against(EXAMPLE, api, tokens, databases) as stack:
        yield Github(stack, api)


@pytest.fixture
def ledger(github: Github) -> Iterator[Ledger]:
    store = Ledger(github.stack.database_url)
    yield store
    store.close()


_wait = partial(wait_for, deadline_seconds=DEADLINE_SECONDS)


def _schedule(ledger: Ledger, policy: Policy, rows: list[tuple[str, str]]) -> list[str]:
    now = datetime.now(UTC)
    new = [NewJob(owner, artifact, now, params={"repo": REPO}) for owner, artifact in rows]
    schedule_jobs(ledger, policy, new, now)
    return [operation_key(policy.name, o, a, policy.version) for o, a in rows]


def _run(ledger: Ledger, policy: Policy, rows: list[tuple[str, str]]) -> dict[str, Job]:
    keys = _schedule(ledger, policy, rows)
    _wait("every artifact final", lambda: len(_final(ledger, keys)) == len(keys))
    return _final(ledger, keys)


def _rows(prefix: str, per_owner: int) -> list[tuple[str, str]]:
    return [(owner, f"{prefix}{n}") for owner in OWNERS for n in range(per_owner)]


def _learned_rates(github: Github) -> dict[str, float]:
    """The rate (calls a second) each owner's primary limit holds in its limiter item (the
    job's scope, keyed by the first limit's key as it renders)."""
    return {
        item["pk"]["S"]: int(item["ar"]["N"]) / 1000
        for item in github.limiter_items()
        if "ar" in item and item["pk"]["S"].startswith(f"{SCOPE_KEY_PREFIX}api.github.com/")
    }


def test_the_github_example_deletes_every_artifact_at_the_rate_github_states(
    github: Github, ledger: Ledger
) -> None:
    # Given the example's policy on the local stack, four owners' artifacts (one in eight
    # already expired), and GitHub stating 5,000 calls an hour per owner
    github.api.reset()
    rows = _rows("a", 8)
    absent = set(rows[::8])
    for owner, artifact in absent:
        github.api.add_absent_artifact(owner, REPO, artifact)
    # When the producer and the consumers run them
    jobs = _run(ledger, github.policy, rows)
    audit = github.audit()

    # Then every obligation is final: deleted, or found already gone
    outcomes = {(j.tenant_id, j.object_id): (j.status, j.last_outcome) for j in jobs.values()}
    assert outcomes == {
        row: (JobStatus.SUCCEEDED, OutcomeClass.ABSENT if row in absent else OutcomeClass.ACCEPTED)
        for row in rows
    }
    # And GitHub saw one DELETE per artifact, one deletion per present artifact
    assert audit.calls_by_artifact == {f"{o}/{REPO}/{a}": 1 for o, a in rows}
    present = [row for row in rows if row not in absent]
    assert audit.effects_by_artifact == {f"{o}/{REPO}/{a}": 1 for o, a in present}
    # And neither limit refused a call: no 403 at all, no owner charged past 900 points a minute
    assert audit.refused_by_limit == {}
    assert audit.responses_by_status == {204: len(rows) - len(absent), 404: len(absent)}
    assert audit.most_points_in_a_window() <= 900
    # And each owner's primary limit holds the rate GitHub stated (5,000/h, its headroom
    # applied), not the told 15,000/h
    told = github.policy.quota
    stated = CORE[0] / CORE[1] * told.effective_headroom
    rates = _learned_rates(github)
    assert len(rates) == len(OWNERS), rates
    assert all(rate == pytest.approx(stated, rel=0.02) for rate in rates.values()), rates
    assert max(rates.values()) < told.rate_per_second / 2
    # and paced each owner's calls by it once learned (the first calls of an owner go at the
    # told rate, in the slots a batch banked before any answer)
    for owner, times in audit.arrivals_by_owner.items():
        later = times[-PACED_CALLS:]
        assert (len(later) - 1) / (later[-1] - later[0]) <= stated * 1.1, owner


def test_a_secondary_limit_403_closes_that_owner_only_and_nothing_is_deleted_twice(
    github: Github, ledger: Ledger
) -> None:
    # Given GitHub answering mona's next call 403 with a retry-after (its secondary limit)
    github.api.reset()
    github.api.throttle_github(owner="mona", retry_after_seconds=RETRY_AFTER_SECONDS)
    rows = _rows("b", 8)
    # When the owners' artifacts run
    jobs = _run(ledger, github.policy, rows)
    audit = github.audit()
    # Then while mona was closed she did not call, and the other owners went on
    (refused_at,) = audit.forced_at
    during = {
        owner
        for owner, times in audit.arrivals_by_owner.items()
        if any(refused_at + QUIET[0] < t < refused_at + QUIET[1] for t in times)
    }
    assert "mona" not in during
    assert during, "the other owners went on"
    # And the 403 spent no attempt: every artifact was deleted once, none refused by a limit
    assert {j.status for j in jobs.values()} == {JobStatus.SUCCEEDED}
    assert audit.effects_by_artifact == {f"{o}/{REPO}/{a}": 1 for o, a in rows}
    assert audit.refused_by_limit == {}
    assert audit.responses_by_status == {204: len(rows), 403: 1}


def test_an_installation_spent_by_another_client_closes_its_owner_until_githubs_reset(
    github: Github, ledger: Ledger
) -> None:
    # Given an owner whose installation another client has spent but for 3 calls this hour
    github.api.reset()
    spent_at = time.time()
    github.api.spend_github(SPENT_OWNER, CORE[0] - LEFT)
    rows = [(SPENT_OWNER, f"c{n}") for n in range(2 * LEFT)]
    # When its artifacts are due
    keys = _schedule(ledger, github.policy, rows)
    table = github.stack.policies["github-artifacts"].resources.limiter_table
    limiter = DynamoLimiter(github.stack.stack.aws.dynamodb(), table)
    scope = f"api.github.com/{SPENT_OWNER}"

    def closed() -> bool:
        return limiter.state(scope).closed(time.time())

    _wait("the owner closed by the answer that left nothing", closed)
    _wait("what was left spent", lambda: len(_final(ledger, keys)) >= LEFT)
    audit = github.audit()
    # Then what was left was spent, each call deleting one artifact, and the answer that said
    # nothing remained closed the owner until GitHub's reset (the window's end, within the
    # hour a stated reset is trusted for): its other artifacts wait for it
    assert sum(audit.effects_by_artifact.values()) == LEFT
    assert set(audit.effects_by_artifact.values()) == {1}
    closed_until = limiter.state(scope).closed_until
    assert closed_until is not None
    assert spent_at + CORE[1] - 30 <= closed_until <= spent_at + CORE[1] + 2
    assert len(_final(ledger, keys)) == LEFT  # the others wait for the reset
    # And no call was made after that answer but those already on their way (the rule: a
    # 403 only to a call in flight when the answer came back, at most parallel_calls x
    # environments - 1 of them; paced, the next call would have come 0.7 s later)
    arrivals = audit.arrivals_by_owner[SPENT_OWNER]
    assert arrivals[-1] - arrivals[LEFT - 1] < IN_FLIGHT_SECONDS, arrivals
    consumer = github.policy.consumer
    in_flight = consumer.parallel_calls * consumer.max_concurrency
    assert audit.refused_by_limit.get("primary", 0) <= in_flight - 1, audit.refused_by_limit
    assert "secondary" not in audit.refused_by_limit
