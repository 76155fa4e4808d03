"""Scripted operator scenarios on the local stack: what someone does at 02:00, end to end.

Each scenario drives the real pipeline (`LocalConsoleStack`) and runs the operator's commands
as a person would, as separate `sweeper ... --json` processes reading the local file, and checks
what they report. `sweeper local scenario dlq|catch-up` runs them; so do the tests.

- `dlq`: a vendor incident long enough to push every message into the DLQ; `status` shows them
  and the closed gate; `redrive` keeps them while the gate is closed; `redrive --dry-run` reports
  what would move; `redrive` moves them; every job ends succeeded with one effect per key.
- `catch-up`: `pause`; scheduled runs pass (skipped and recorded) and one is never delivered;
  `resume`; `catch-up` releases the missed runs in order, each with its own batch id.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from sweeper.errors import LimiterError
from sweeper.ledger.store import Ledger
from sweeper.limiter import DynamoLimiter
from sweeper.models import JobStatus, NewJob
from sweeper.redrive.letters import queue_depth
from sweeper.scheduling import schedule_jobs
from sweeper_local.background import LocalConsoleStack
from sweeper_local.errors import LocalStackError
from sweeper_tools.endpoints import write_local_file
from sweeper_tools.policy_file import load_config

POLICY = "exports"
#: The scenarios' policy file: one policy, one global scope, short leases and timeouts.
SCENARIO_CONFIG = """
[[policies]]
name = "exports"
schedule = "rate(1 minute)"
lease_seconds = 120
producer_budget_seconds = 20

[policies.quota]
limit = 50
period_seconds = 1.0

[policies.consumer]
reserved_concurrency = 2
max_concurrency = 2
timeout_seconds = 10
max_receive_count = 5

[policies.throttle]
max_wait_seconds = 0.5
reopen_jitter_seconds = 0.05
"""
COMMAND_TIMEOUT_SECONDS = 120.0
#: The dlq scenario's second incident: its 429s say Retry-After this long, and while `status` and
#: `redrive` run the script keeps the gate closed, renewing the closure to this long ahead as a
#: vendor still refusing would. Once they have run, the gate reopens this long after the last
#: renewal: the wait ends with the commands, however long a loaded machine makes them. The 7th
#: job's message, deferred until each reopening, spends a receive per this long of the hold
#: (and one at the 429, one after it ends): with max_receive_count 5 the two commands have about
#: 45 s before it would dead-letter, where the fixed 30 s Retry-After used to give them 30 s.
GATE_HOLD_SECONDS = 15
#: How often the script renews the closure while the commands run.
GATE_RENEW_SECONDS = 1.0

Echo = Callable[[str], None]


class ScenarioError(LocalStackError):
    """A scenario step did not come out as expected."""


@dataclass
class Step:
    command: str
    output: dict[str, Any]


@dataclass
class ScenarioReport:
    scenario: str
    steps: list[Step] = field(default_factory=list)
    checks: dict[str, Any] = field(default_factory=dict)
    elapsed_seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def step(self, command: str, nth: int = 0) -> dict[str, Any]:
        """The output of the nth step (0 the first, -1 the last) that ran `command`."""
        return [done.output for done in self.steps if done.command == command][nth]


@contextlib.contextmanager
def hold_gate(
    limiter: DynamoLimiter, scope: str, *, hold_seconds: float, renew_seconds: float
) -> Iterator[None]:
    """Keep a scope's gate closed while the block runs: every `renew_seconds` the closure is
    renewed to `hold_seconds` ahead, by the limiter call a consumer makes on a 429 with
    Retry-After (a renewal that fails is tried again at the next). Once the block has run, the
    gate reopens `hold_seconds` after the last renewal."""
    stop = threading.Event()

    def renew() -> None:
        while not stop.is_set():
            with contextlib.suppress(LimiterError):
                limiter.close(scope, time.time() + hold_seconds, "throttled")
            stop.wait(renew_seconds)

    renewer = threading.Thread(target=renew, name="scenario-gate-hold", daemon=True)
    renewer.start()
    try:
        yield
    finally:
        stop.set()
        renewer.join()


class _Script:
    def __init__(
        self, stack: LocalConsoleStack, local_file: Path, name: str, echo: Echo | None
    ) -> None:
        self.stack = stack
        self.local_file = local_file
        self.report = ScenarioReport(name)
        self.echo = echo or (lambda text: None)
        self.ledger = Ledger(stack.database_url)
        resources = stack.policies[POLICY].resources
        self.dlq_url = resources.dlq_url
        self.sqs = stack.stack.aws.sqs()
        self.limiter_table = resources.limiter_table
        self.limiter = DynamoLimiter(stack.stack.aws.dynamodb(), resources.limiter_table)

    def run(self, *args: str, ok_codes: tuple[int, ...] = (0,)) -> dict[str, Any]:
        """`sweeper <args> --json` in its own process, against the local file."""
        command = " ".join(args)
        self.echo(f"$ sweeper {command} --json")
        done = subprocess.run(  # noqa: S603 - our own interpreter and module, no shell
            [
                sys.executable,
                "-m",
                "sweeper_cli",
                *args,
                "--local-file",
                str(self.local_file),
                "--json",
            ],
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_SECONDS,
            check=False,
        )
        if done.returncode not in ok_codes:
            raise ScenarioError(
                f"`sweeper {command}` exited {done.returncode}: {done.stderr.strip()[-1500:]}"
            )
        output: dict[str, Any] = json.loads(done.stdout)
        self.echo(json.dumps(output, default=str))
        self.report.steps.append(Step(command, output))
        return output

    def wait(self, what: str, condition: Callable[[], bool], timeout_seconds: float) -> None:
        """Poll until `condition` holds (never a bare sleep), or fail the scenario."""
        self.echo(f"... waiting until {what}")
        deadline = time.monotonic() + timeout_seconds
        while not condition():
            failure = self.stack.failure()
            if failure is not None:
                raise ScenarioError(f"the local stack failed: {failure!r}")
            if time.monotonic() > deadline:
                raise ScenarioError(f"gave up after {timeout_seconds:.0f} s waiting until {what}")
            time.sleep(0.2)

    def check(self, name: str, value: Any, expected: Any) -> None:
        self.report.checks[name] = value
        if value != expected:
            last = self.report.steps[-1].output if self.report.steps else None
            raise ScenarioError(f"{name}: expected {expected!r}, got {value!r}; last: {last}")

    def seed(self, first: int, count: int) -> list[str]:
        policy = self.stack.policies[POLICY].policy
        now = datetime.now(UTC)
        jobs = [NewJob("tenant-1", f"object-{i:04d}", now) for i in range(first, first + count)]
        schedule_jobs(self.ledger, policy, jobs, now)
        return [f"{POLICY}:tenant-1:object-{i:04d}:v1" for i in range(first, first + count)]

    def dlq_depth(self) -> int:
        return queue_depth(self.sqs, self.dlq_url)[0]

    def gate_closed(self) -> bool:
        return self.limiter.state(POLICY).closed(time.time())

    def gate_held(self) -> contextlib.AbstractContextManager[None]:
        """The policy's gate kept closed while the block runs (hold_gate)."""
        # A limiter of its own: its counters are not shared with the script's thread.
        limiter = DynamoLimiter(self.stack.stack.aws.dynamodb(), self.limiter_table)
        return hold_gate(
            limiter, POLICY, hold_seconds=GATE_HOLD_SECONDS, renew_seconds=GATE_RENEW_SECONDS
        )

    def succeeded(self) -> int:
        return self.ledger.counts(POLICY)[JobStatus.SUCCEEDED]


def dlq_scenario(
    stack: LocalConsoleStack, local_file: Path, *, jobs: int = 6, echo: Echo | None = None
) -> ScenarioReport:
    """A vendor incident pushes every message into the DLQ; the operator redrives them."""
    started = time.monotonic()
    script = _Script(stack, local_file, "dlq", echo)
    vendor = stack.stack.vendor
    if vendor is None:
        raise ScenarioError("the dlq scenario needs the vendor simulator")
    try:
        # The incident: every call is refused (429, Retry-After 1 s) while the pipeline runs.
        vendor.start_incident(300, retry_after_seconds=1)
        keys = script.seed(0, jobs)
        script.wait(
            f"all {jobs} messages are in the DLQ",
            lambda: script.dlq_depth() == jobs,
            timeout_seconds=90,
        )
        script.check("effects during the incident", vendor.audit().effects_total, 0)
        # The vendor is still refusing when one more job arrives: its answer closes the gate.
        # The long incident ends; a short one is still on, long enough for the gate it closes
        # to stay closed through `status` and `redrive` (commands of their own, seconds each).
        vendor.reset()
        vendor.start_incident(GATE_HOLD_SECONDS, retry_after_seconds=GATE_HOLD_SECONDS)
        keys += script.seed(jobs, 1)
        script.wait("the vendor's 429 closes the gate", script.gate_closed, timeout_seconds=30)

        with script.gate_held():
            status = script.run("status")
            (policy,) = status["policies"]
            script.check("status: DLQ depth", policy["dlq"]["messages"], jobs)
            script.check("status: gate closed", [g["closed"] for g in policy["gates"]], [True])

            kept = script.run("redrive")
            script.check("redrive while closed: kept", kept["kept_closed"], jobs)
            script.check("redrive while closed: moved", kept["moved"], 0)

        script.wait(
            "the gate reopens",
            lambda: not script.gate_closed(),
            timeout_seconds=GATE_HOLD_SECONDS + 30,
        )
        dry = script.run("redrive", "--dry-run")
        script.check("dry run: would move", dry["moved"], jobs)
        script.check("dry run: left in the DLQ", dry["left"], jobs)

        moved = script.run("redrive")
        script.check("redrive: moved", moved["moved"], jobs)
        script.check("redrive: left in the DLQ", moved["left"], 0)

        script.wait(
            "every job has succeeded",
            lambda: script.succeeded() == len(keys),
            timeout_seconds=60,
        )
        effects = vendor.audit().effects_by_key
        script.check("effects per key", sorted({effects.get(k, 0) for k in keys}), [1])
        final = script.run("status")["policies"][0]
        script.check("final: succeeded", final["counts"]["succeeded"], len(keys))
        script.check("final: DLQ depth", final["dlq"]["messages"], 0)
    finally:
        script.ledger.close()
    script.report.elapsed_seconds = round(time.monotonic() - started, 2)
    return script.report


def catch_up_scenario(
    stack: LocalConsoleStack, local_file: Path, *, runs: int = 4, echo: Echo | None = None
) -> ScenarioReport:
    """Pause, let scheduled runs pass, resume, and release the missed runs with catch-up."""
    started = time.monotonic()
    script = _Script(stack, local_file, "catch-up", echo)
    runtime = stack.policies[POLICY]
    try:
        keys = script.seed(0, 5)
        paused = script.run("pause", "--reason", "vendor maintenance")
        script.check("pause: paused", paused["paused"], True)
        script.wait("the consumers have stopped", lambda: runtime.paused, timeout_seconds=10)

        # The scheduler keeps firing (rate(1 minute)); the clock is moved on by sending the
        # events it sent during the pause. The last time's event is lost on the way.
        base = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=30)
        times = [base + timedelta(minutes=i) for i in range(1, runs + 2)]
        for at in times[:-1]:
            fired = stack.fire(POLICY, at)
            if fired.error is not None:
                raise ScenarioError(f"producer failed: {fired.error}")
            script.check(f"run {at:%H:%M} while paused", fired.response["stop_reason"], "paused")
        script.check("jobs released while paused", script.succeeded(), 0)

        resumed = script.run("resume")
        script.check("resume: paused", resumed["paused"], False)
        since, until = times[0].isoformat(), times[-1].isoformat()
        report = script.run("catch-up", "--since", since, "--until", until)
        released = report["runs"]
        script.check(
            "catch-up: times in order",
            [r["scheduled_at"] for r in released],
            [t.isoformat() for t in times],
        )
        script.check("catch-up: was", [r["was"] for r in released], ["paused"] * runs + ["missing"])
        script.check(
            "catch-up: distinct batch ids", len({r["batch_id"] for r in released}), runs + 1
        )
        script.check("catch-up: released", all(r["released"] for r in released), True)
        script.check("catch-up: published", sum(r["published"] for r in released), len(keys))

        script.wait("every job has succeeded", lambda: script.succeeded() == len(keys), 60)
        again = script.run("catch-up", "--since", since, "--until", until)
        script.check("second catch-up: missed", again["missed"], 0)
    finally:
        script.ledger.close()
    script.report.elapsed_seconds = round(time.monotonic() - started, 2)
    return script.report


class _Scenario(Protocol):
    def __call__(
        self, stack: LocalConsoleStack, local_file: Path, *, echo: Echo | None = None
    ) -> ScenarioReport: ...


SCENARIOS: dict[str, _Scenario] = {"dlq": dlq_scenario, "catch-up": catch_up_scenario}


def run_scenario(
    name: str, *, database_url: str | None = None, echo: Echo | None = None
) -> ScenarioReport:
    """Start a local stack of its own (PostgreSQL too, unless given) and run one scenario."""
    scenario = SCENARIOS[name]
    with tempfile.TemporaryDirectory(prefix="sweeper-scenario-") as folder:
        config_path = Path(folder) / "sweeper.toml"
        config_path.write_text(SCENARIO_CONFIG, encoding="utf-8")
        local_file = Path(folder) / "local.json"
        with LocalConsoleStack(
            load_config(config_path),
            config_path=str(config_path),
            database_url=database_url,
            tick_seconds=1.0 if name == "dlq" else None,
        ) as stack:
            write_local_file(stack.local_file(), local_file)
            return scenario(stack, local_file, echo=echo)
