"""docs/examples/helpdesk.toml end to end (issue 41, point 2): a host and a login per account.

The policy file as shipped, its secret template pointed at the local Secrets Manager as the
local stack points it (`with_local_secrets`, each account's login given under its filled ARN,
as SWEEPER_LOCAL_SECRETS gives them). The producer and consumer handlers run as Lambda runs
them, on the local queue, limiter and ledger; the help desk is the vendor simulator's, over
TLS with a certificate for `*.helpdesk.example` that this test trusts. Each account's host
reaches it through urllib3's own resolver seam (`urllib3.util.connection.create_connection`,
every name under `.helpdesk.example` to the simulator's loopback port; the machine's DNS is
left alone), so the URL, the TLS name and the Host header are the account's own, and the
simulator checks that each account's login arrives at its own host only.
"""

from __future__ import annotations

import secrets
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import urllib3.util.connection

from functions.consumer import app as consumer_app
from functions.producer import app as producer_app
from sweeper import runtime
from sweeper.actions.secret_template import SecretTemplate
from sweeper.config import HttpActionConfig, Policy
from sweeper.ledger.store import Ledger
from sweeper.limiter import DynamoLimiter
from sweeper.models import Job, JobStatus, NewJob, OutcomeClass, operation_key
from sweeper.scheduling import schedule_jobs
from sweeper_local.action_secrets import with_local_secrets
from sweeper_local.aws import LocalAws, PipelineResources, provision
from sweeper_local.helpdesk import HELPDESK_SUFFIX, HelpDesk
from sweeper_local.lambda_runtime import LocalLambdaContext
from sweeper_local.pipeline import scheduler_event
from sweeper_local.vendor import VendorSimulator
from sweeper_tools.policy_file import load_config
from tests.conftest import function_env, load_event
from tests.tls import trusted_server_context

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).parents[2] / "docs" / "examples" / "helpdesk.toml"
FINAL = frozenset({JobStatus.SUCCEEDED, JobStatus.FAILED})
DEADLINE_SECONDS = 60.0
#: Accounts whose login is in Secrets Manager, and one whose secret is missing.
ACCOUNTS = ("acme", "globex", "initech")
WITHOUT_SECRET = "umbrella"
TICKETS = 4
HTTPS_PORT = 443
#: What umbrella's jobs may show: the missing secret, or a wait on its scope closed by it.
UMBRELLA_CODES = frozenset({"secret_missing", "wait_auth"})


@dataclass
class Desk:
    policy: Policy
    ledger: Ledger
    resources: PipelineResources
    aws: LocalAws
    sim: VendorSimulator
    #: Every host name the consumer looked up under the help desk's suffix.
    looked_up: list[str]
    #: The operation keys of every job scheduled so far.
    keys: list[str] = field(default_factory=list)

    @property
    def helpdesk(self) -> HelpDesk:
        return self.sim.helpdesk


def _route_to_loopback(monkeypatch: pytest.MonkeyPatch, port: int, seen: list[str]) -> None:
    """Names under the help desk's suffix, port 443, connect to the simulator on loopback."""
    original = urllib3.util.connection.create_connection

    def create_connection(address: tuple[str, int], *args: Any, **kwargs: Any) -> Any:
        host, wanted = address
        if host.endswith(HELPDESK_SUFFIX) and wanted == HTTPS_PORT:
            seen.append(host)
            return original(("127.0.0.1", port), *args, **kwargs)
        return original(address, *args, **kwargs)

    monkeypatch.setattr(urllib3.util.connection, "create_connection", create_connection)


@pytest.fixture
def desk(
    db_url: str,
    local_aws: LocalAws,
    aws_env: dict[str, str],
    unique_name: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Desk]:
    tls = trusted_server_context(tmp_path, monkeypatch, [f"*{HELPDESK_SUFFIX}"])
    shipped = load_config(EXAMPLE).policy("helpdesk")
    template = _template(shipped)
    with VendorSimulator(tls=tls) as sim:
        # Given each account's login at the help desk, and in Secrets Manager but umbrella's
        logins = {a: (f"agent@{a}.example/token", secrets.token_hex(8)) for a in ACCOUNTS}
        for account, (username, password) in logins.items():
            sim.helpdesk.add_account(account, username, password)
        sim.helpdesk.add_account(WITHOUT_SECRET, "agent@umbrella.example/token", "pw")
        given: dict[str, Any] = {}
        for account, (username, password) in logins.items():
            arn = template.arn_for(account)
            assert arn is not None
            given[arn] = {"username": username, "password": password}
        policy = with_local_secrets(
            local_aws.secretsmanager(), shipped, prefix=unique_name, vendor=None, given=given
        )
        resources = provision(local_aws.sqs(), local_aws.dynamodb(), policy, prefix=unique_name)
        for name, value in function_env(policy, db_url, resources).items():
            monkeypatch.setenv(name, value)
        looked_up: list[str] = []
        port = urlsplit(sim.url).port
        assert port is not None
        _route_to_loopback(monkeypatch, port, looked_up)
        runtime.reset()
        ledger = Ledger(db_url)
        try:
            yield Desk(policy, ledger, resources, local_aws, sim, looked_up)
        finally:
            ledger.close()
            runtime.reset()


def _template(policy: Policy) -> SecretTemplate:
    """The policy's secret template (the example's, or the local one it was pointed at)."""
    assert isinstance(policy.action, HttpActionConfig)
    template = policy.action.effective_auth.secret_template()
    assert template is not None
    return template


def _schedule(desk: Desk, accounts: tuple[str, ...]) -> dict[str, list[str]]:
    now = datetime.now(UTC)
    rows = [(a, f"{n + 1000}") for n in range(TICKETS) for a in accounts]
    schedule_jobs(desk.ledger, desk.policy, [NewJob(a, t, now) for a, t in rows], now)
    keys: dict[str, list[str]] = {}
    for account, ticket in rows:
        key = operation_key(desk.policy.name, account, ticket, desk.policy.version)
        keys.setdefault(account, []).append(key)
        desk.keys.append(key)
    return keys


def _deliver_once(desk: Desk) -> None:
    """One scheduler tick, then one batch of what the queue shows, as the event source would
    hand it to the consumer (succeeded records deleted, failed ones left to reappear)."""
    producer_app.handler(
        scheduler_event(desk.policy.name, datetime.now(UTC)),
        LocalLambdaContext(function_name="sweeper-producer", timeout_seconds=60),
    )
    sqs = desk.aws.sqs()
    got = sqs.receive_message(QueueUrl=desk.resources.queue_url, MaxNumberOfMessages=10)
    messages = got.get("Messages", [])
    if not messages:
        time.sleep(0.1)  # the queue is empty for now: poll again (the loop has a deadline)
        return
    template = load_event("sqs_batch.json")["Records"][0]
    records = [
        {**template, "messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"]}
        | {"body": m["Body"]}
        for m in messages
    ]
    response = consumer_app.handler(
        {"Records": records},
        LocalLambdaContext(function_name="sweeper-consumer", timeout_seconds=60),
    )
    failed = {item["itemIdentifier"] for item in response["batchItemFailures"]}
    for m in messages:
        if m["MessageId"] not in failed:
            sqs.delete_message(QueueUrl=desk.resources.queue_url, ReceiptHandle=m["ReceiptHandle"])


def _run_until(desk: Desk, what: str, done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not done():
        assert time.monotonic() < deadline, (
            f"not within {DEADLINE_SECONDS} s: {what}; jobs {_states(desk)}, "
            f"help desk {desk.helpdesk.audit()}"
        )
        _deliver_once(desk)


def _states(desk: Desk) -> dict[str, int]:
    """How many jobs stand where (status, last outcome, code): what a failure shows."""
    jobs = _jobs(desk, desk.keys)
    return dict(
        Counter(f"{j.tenant_id} {j.status}/{j.last_outcome}/{j.last_error_code}" for j in jobs)
    )


def _jobs(desk: Desk, keys: list[str]) -> list[Job]:
    jobs = [desk.ledger.get(key) for key in keys]
    assert all(job is not None for job in jobs)
    return [job for job in jobs if job is not None]


def test_each_account_is_called_at_its_own_host_with_its_own_login(desk: Desk) -> None:
    # Given four tickets of each account, umbrella's secret missing, and the help desk
    # answering acme's first call 429 with a Retry-After and globex's first without one
    desk.helpdesk.throttle_next("acme", retry_after_seconds=1)
    desk.helpdesk.throttle_next("globex", retry_after_seconds=None)
    keys = _schedule(desk, (*ACCOUNTS, WITHOUT_SECRET))
    served = [key for account in ACCOUNTS for key in keys[account]]

    def settled() -> bool:
        codes = {job.last_error_code for job in _jobs(desk, keys[WITHOUT_SECRET])}
        served_final = all(job.status in FINAL for job in _jobs(desk, served))
        return served_final and codes <= UMBRELLA_CODES and "secret_missing" in codes

    # When the producer and the consumer run them
    _run_until(desk, "every served ticket final, umbrella's jobs refused", settled)
    audit = desk.helpdesk.audit()

    # Then every ticket of the accounts with a login was deleted once, despite the 429s
    assert {job.status for job in _jobs(desk, served)} == {JobStatus.SUCCEEDED}
    tickets = {f"{a}/{n + 1000}" for a in ACCOUNTS for n in range(TICKETS)}
    assert audit.effects_by_ticket == dict.fromkeys(tickets, 1)
    assert audit.throttled_by_account == {"acme": 1, "globex": 1}
    # And each account's login reached its own host and no other: no login was misdirected,
    # and umbrella's host was never called (its login was never had)
    assert audit.misdirected == 0
    assert {host: set(owners) for host, owners in audit.logins_by_host.items()} == {
        a: {a} for a in ACCOUNTS
    }
    # (umbrella's host may have been connected to ahead of its call, by `warm`: no byte sent)
    accounts = (*ACCOUNTS, WITHOUT_SECRET)
    assert set(desk.looked_up) - {f"{a}{HELPDESK_SUFFIX}" for a in accounts} == set()
    # And umbrella alone failed: as auth naming its missing secret, then its other jobs
    # waiting on its own closed scope (never final, never called)
    umbrella = _jobs(desk, keys[WITHOUT_SECRET])
    assert not {j.status for j in umbrella} & FINAL
    assert (OutcomeClass.AUTH, "secret_missing") in {
        (j.last_outcome, j.last_error_code) for j in umbrella
    }
    limiter = DynamoLimiter(desk.aws.dynamodb(), desk.resources.limiter_table)
    now = time.time()
    closed = {a: limiter.state(f"helpdesk:{a}").closed(now) for a in (*ACCOUNTS, "umbrella")}
    assert closed == {"acme": False, "globex": False, "initech": False, "umbrella": True}
    assert limiter.state("helpdesk:umbrella").reason == "auth"


def test_a_login_sent_to_another_accounts_host_is_refused_and_seen(desk: Desk) -> None:
    # Given initech's secret holding acme's login by mistake (the help desk refuses it at
    # initech's host, and the simulator counts it as misdirected)
    template = _template(desk.policy)
    client = desk.aws.secretsmanager()
    acme_login = client.get_secret_value(SecretId=template.arn_for("acme"))["SecretString"]
    client.put_secret_value(SecretId=template.arn_for("initech"), SecretString=acme_login)
    keys = _schedule(desk, ("initech",))
    # When its jobs run
    _run_until(
        desk,
        "initech's jobs refused",
        lambda: any(j.last_outcome is OutcomeClass.AUTH for j in _jobs(desk, keys["initech"])),
    )
    # Then the help desk saw acme's login at initech's host, refused it, and nothing was deleted
    audit = desk.helpdesk.audit()
    assert audit.misdirected >= 1
    assert audit.logins_by_host == {"initech": {"acme": audit.misdirected}}
    assert audit.effects_by_ticket == {}
