"""`sweeper local up` / `local down`: the local stack as a background service for the console.

`LocalConsoleStack` runs, for every policy of the policy file: its queue and DLQ, the consumer
(the local event source feeding worker processes), a producer ticker invoking the producer
handler at the times the policy's schedule names (or every `tick_seconds`), and its redrive on
its schedule (sweeper_local.redrive_runner). A watcher reads each policy's paused flag from the
ledger once a second and pauses or resumes its event source, as `sweeper pause` disables the
event source mapping on AWS. `serve` runs it until SIGTERM and writes
the local file that every command reads; `start_background` spawns `serve` detached.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import FrameType
from typing import Any, Self

from sweeper.config import Policy, SweeperConfig
from sweeper.endpoints import LocalFile, PolicyEndpoints
from sweeper.errors import LedgerError, OperatorError
from sweeper.ledger.store import Ledger
from sweeper.redaction import redact
from sweeper.schedule_expression import occurrences
from sweeper_local.action_secrets import LOCAL_SECRETS_ENV, parse_local_secrets, with_local_secrets
from sweeper_local.action_targets import make_action_targets
from sweeper_local.aws import LOCAL_REGION, PipelineResources
from sweeper_local.errors import LocalStackError
from sweeper_local.intake import LocalIntake
from sweeper_local.lambda_runtime import LAYER_PATH_VARIABLE, Invocation
from sweeper_local.metric_totals import CountingSink
from sweeper_local.pipeline import LocalPipeline
from sweeper_local.redrive_runner import LocalRedrive
from sweeper_local.rehearsal import check_rehearsal
from sweeper_local.service import Service
from sweeper_local.stack import LocalStack
from sweeper_local.webhook import LocalWebhook
from sweeper_tools.deploy import deploy_for
from sweeper_tools.endpoints import LOCAL_CONSUMER_FUNCTION, read_local_file, write_local_file
from sweeper_tools.planning.consumer_defaults import deployed_config
from sweeper_tools.policy_file import load_config

#: How often the watcher reads the paused flags (one primary-key read per policy).
PAUSE_POLL_SECONDS = 1.0
#: Backoff of the watcher after the ledger failed to answer: doubles up to the cap.
WATCH_BACKOFF_SECONDS = (0.5, 5.0)
START_TIMEOUT_SECONDS = 90.0
STOP_TIMEOUT_SECONDS = 60.0

log = logging.getLogger(__name__)


@dataclass
class _PolicyRuntime:
    pipeline: LocalPipeline
    intake: LocalIntake
    redrive: LocalRedrive
    paused: bool = False
    ticks: int = 0

    @property
    def policy(self) -> Policy:
        return self.pipeline.policy

    @property
    def resources(self) -> PipelineResources:
        return self.pipeline.resources


class LocalConsoleStack(Service):
    """Every policy's pipeline on the local stack, with tickers and the pause watcher."""

    def __init__(
        self,
        config: SweeperConfig,
        *,
        config_path: str,
        database_url: str | None = None,
        api_url: str | None = None,
        tick_seconds: float | None = None,
        visibility_timeout_seconds: int | None = None,
        prefix: str = "sweeper",
        log_file: str | None = None,
        secret_values: dict[str, Any] | None = None,
        intake_consumers: bool = True,
        keep_wake: bool = False,
    ) -> None:
        """`intake_consumers`: run each policy's intake function on its queue; a stack that
        receives no hints (a drill's) leaves it out, its queue made and its processes not.
        `keep_wake`: each policy's functions keep its wake item as on AWS (LocalPipeline)."""
        self.config = config
        self.intake_consumers = intake_consumers
        self.keep_wake = keep_wake
        #: An outside vendor's secret values by the ARN the policy names
        #: (sweeper_local.action_secrets).
        self.secret_values = secret_values or {}
        self.config_path = config_path
        # api_url: an external vendor speaking the same contract instead of the simulator.
        self.stack = LocalStack(database_url=database_url, api_url=api_url)
        #: Every ticker's schedule is anchored here (the first run is one period later).
        self.started_at = datetime.now(UTC).replace(microsecond=0)
        self.tick_seconds = tick_seconds
        self.visibility_timeout_seconds = visibility_timeout_seconds
        self.prefix = prefix
        self.log_file = (
            log_file
            or tempfile.NamedTemporaryFile(  # noqa: SIM115 - kept to read
                prefix="sweeper-local-", suffix=".log", delete=False
            ).name
        )
        self.policies: dict[str, _PolicyRuntime] = {}
        #: Signs every policy's webhook requests locally (on AWS each policy has its own).
        self.webhook_secret = secrets.token_hex(32)
        self.webhook: LocalWebhook | None = None
        self.webhook_metrics = CountingSink()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.errors: list[BaseException] = []
        self.ledger_errors = 0  # reads of the paused flags that failed and were retried

    @property
    def database_url(self) -> str:
        if self.stack.database_url is None:
            raise LocalStackError("the local stack is not started")
        return self.stack.database_url

    def start(self) -> Self:
        check_rehearsal(self.config.policies, self.stack.api_url)
        self.stack.start()
        try:
            for configured in self.config.policies:
                self._start_policy(configured)
            served = [r for r in self.policies.values() if r.policy.intake.webhook]
            self.webhook = LocalWebhook(
                {r.policy.name: r.intake.webhook_deps(self.webhook_metrics) for r in served},
                concurrency=max(
                    (r.policy.intake.webhook_reserved_concurrency for r in served), default=1
                ),
            ).start()
            self._spawn(self._watch_pauses, "pause-watcher")
            for runtime in self.policies.values():
                self._spawn(lambda r=runtime: self._tick(r), f"ticker-{runtime.policy.name}")
        except BaseException:
            self.stop()
            raise
        return self

    def _start_policy(self, configured: Policy) -> None:
        # As written: its calls reach the stack's vendor by the pipeline's rehearsal
        # (sweeper_local.rehearsal), its secrets made in the local Secrets Manager (none
        # exists there).
        policy = with_local_secrets(
            self.stack.aws.secretsmanager(),
            configured,
            prefix=self.prefix,
            vendor=self.stack.vendor,
            given=self.secret_values,
        )
        # What its action calls, where nothing exists locally yet (an s3_delete action's bucket).
        make_action_targets(self.stack.aws, policy)
        # The team's own action code (a python kind), where its layer would put it on Lambda.
        code = deploy_for(configured.action).layer_dir(Path(self.config_path).resolve().parent)
        pipeline = LocalPipeline(
            self.stack,
            policy,
            extra_env={LAYER_PATH_VARIABLE: str(code)} if code is not None else None,
            prefix=self.prefix,
            log_file=self.log_file,
            visibility_timeout_seconds=self.visibility_timeout_seconds,
            consumer_function_name=LOCAL_CONSUMER_FUNCTION.format(policy=policy.name),
            producer_function_name=f"sweeper-{policy.name}-producer",
            keep_wake=self.keep_wake,
        )
        intake = LocalIntake(
            self.stack,
            policy,
            secret=self.webhook_secret,
            prefix=self.prefix,
            log_file=self.log_file,
        )
        redrive = LocalRedrive(policy, pipeline.env, self.log_file)  # on its schedule's period
        self.policies[policy.name] = _PolicyRuntime(pipeline, intake, redrive)
        if self.intake_consumers:
            intake.source.start()  # its environments cold-start while the pipeline's do
        pipeline.start()
        redrive.start()
        if self.intake_consumers:
            intake.start()

    def _spawn(self, target: Any, name: str) -> None:
        def run() -> None:
            try:
                target()
            except BaseException as exc:  # surfaced by stop() and by `local up`'s log
                self.errors.append(exc)
                self._stop.set()

        thread = threading.Thread(target=run, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _watch_pauses(self) -> None:
        """Follow each policy's paused flag; a ledger that does not answer (the database
        restarting) is logged and asked again with backoff, the flags kept as they were."""
        ledger = Ledger(self.database_url)
        backoff = WATCH_BACKOFF_SECONDS[0]
        try:
            while not self._stop.is_set():
                try:
                    self._follow_pauses(ledger)
                except LedgerError as exc:
                    self.ledger_errors += 1
                    log.warning("pause watcher: %s; asking again in %.1f s", exc, backoff)
                    ledger.close()  # reconnect on the next read
                    self._stop.wait(backoff)
                    backoff = min(backoff * 2, WATCH_BACKOFF_SECONDS[1])
                    continue
                backoff = WATCH_BACKOFF_SECONDS[0]
                self._stop.wait(PAUSE_POLL_SECONDS)
        finally:
            ledger.close()

    def _follow_pauses(self, ledger: Ledger) -> None:
        for runtime in self.policies.values():
            paused = ledger.is_paused(runtime.policy.name)
            if paused and not runtime.paused:
                runtime.pipeline.source.pause()
            elif runtime.paused and not paused:
                runtime.pipeline.source.resume()
            runtime.paused = paused

    def failure(self) -> BaseException | None:
        """The first error that stopped a part of the stack (a thread or an event source)."""
        if self.errors:
            return self.errors[0]
        for runtime in self.policies.values():
            for source in (runtime.pipeline.source, runtime.intake.source):
                if source.error is not None:
                    return source.error
        return None

    def next_tick(self, policy: Policy, after: datetime, anchor: datetime) -> datetime:
        """The next scheduled time strictly after `after`."""
        if self.tick_seconds is not None:
            step = timedelta(seconds=self.tick_seconds)
            return anchor + ((after - anchor) // step + 1) * step
        horizon = after + timedelta(days=1)
        for at in occurrences(policy.schedule, policy.timezone, after, horizon, anchor=anchor):
            if at > after:
                return at
        return horizon

    def _tick(self, runtime: _PolicyRuntime) -> None:
        anchor = self.started_at
        last = anchor  # the first run is one period after the start
        while not self._stop.is_set():
            at = self.next_tick(runtime.policy, last, anchor)
            if self._stop.wait(max(0.0, (at - datetime.now(UTC)).total_seconds())):
                return
            result = self.fire(runtime.policy.name, at)
            if result.error is not None:  # the next tick publishes what this one did not
                log.warning("producer %s failed: %s", runtime.policy.name, result.error)
            last = at

    def fire(self, policy: str, at: datetime) -> Invocation:
        """Invoke the policy's producer with the scheduler's event for `at`, as its tick does."""
        runtime = self.policies[policy]
        result = runtime.pipeline.fire(at)
        runtime.ticks += 1
        return result

    def local_file(self) -> LocalFile:
        any_runtime = next(iter(self.policies.values()))
        return LocalFile(
            pid=os.getpid(),
            database_url=self.database_url,
            aws_endpoint_url=self.stack.aws.endpoint_url,
            service_endpoint_urls=self.stack.aws.service_endpoint_urls(),
            region=LOCAL_REGION,
            vendor_url=self.stack.api_url,
            limiter_table=any_runtime.resources.limiter_table,
            idempotency_table=any_runtime.resources.idempotency_table,
            log_file=self.log_file,
            config=self.config_path,
            policies={
                name: PolicyEndpoints(
                    queue_url=r.resources.queue_url,
                    dlq_url=r.resources.dlq_url,
                    consumer_function=LOCAL_CONSUMER_FUNCTION.format(policy=name),
                    producer_function=r.pipeline.producer_function_name,
                    intake_queue_url=r.intake.resources.queue_url,
                    intake_dlq_url=r.intake.resources.dlq_url,
                )
                for name, r in self.policies.items()
            },
            started_at=self.started_at,
            tick_seconds=self.tick_seconds,
            webhook_url=self.webhook.url if self.webhook is not None else None,
            webhook_secret=self.webhook_secret,
        )

    def stop(self) -> None:
        self._stop.set()
        for runtime in self.policies.values():  # their long polls and environments end at once
            runtime.intake.source.stop_soon()
            runtime.pipeline.source.stop_soon()
        for thread in self._threads:
            thread.join(timeout=STOP_TIMEOUT_SECONDS)
        try:
            if self.webhook is not None:
                self.webhook.stop()
            for runtime in self.policies.values():
                runtime.redrive.stop()
                with contextlib.suppress(Exception):  # its error was reported as it happened
                    runtime.intake.stop()
                with contextlib.suppress(Exception):
                    runtime.pipeline.stop()
        finally:
            self.stack.stop()


# -- the background service ---------------------------------------------------------------------


def serve(
    config_path: str,
    state_file: Path,
    *,
    database_url: str | None,
    tick_seconds: float | None,
    visibility_timeout_seconds: int | None,
    api_url: str | None = None,
    secret_values: dict[str, Any] | None = None,
) -> int:
    """Run the local stack until SIGTERM or SIGINT; the local file exists while it runs."""
    stopping = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    # run as synth deploys it: the consumer's sizing the file leaves out, derived
    config = deployed_config(load_config(config_path))
    with LocalConsoleStack(
        config,
        config_path=str(Path(config_path).resolve()),
        database_url=database_url,
        api_url=api_url,
        tick_seconds=tick_seconds,
        visibility_timeout_seconds=visibility_timeout_seconds,
        secret_values=secret_values,
    ) as stack:
        write_local_file(stack.local_file(), state_file)
        try:
            while not stopping.wait(0.5):
                failure = stack.failure()
                if failure is not None:
                    raise LocalStackError(
                        f"the local stack failed: {redact(repr(failure), database_url)}"
                    )
        finally:
            with contextlib.suppress(FileNotFoundError):
                state_file.unlink()
    return 0


def start_background(
    config_path: str,
    state_file: Path,
    *,
    database_url: str | None = None,
    tick_seconds: float | None = None,
    visibility_timeout_seconds: int | None = None,
    timeout_seconds: float = START_TIMEOUT_SECONDS,
    api_url: str | None = None,
) -> LocalFile:
    """Spawn `serve` detached and wait until it has written the local file."""
    existing = live_local_file(state_file)
    if existing is not None:
        raise OperatorError(f"a local stack already runs (pid {existing.pid}); see {state_file}")
    with contextlib.suppress(FileNotFoundError):
        state_file.unlink()
    state_file.parent.mkdir(parents=True, exist_ok=True)
    log_path = state_file.with_suffix(".log")
    argv = [
        sys.executable,
        "-m",
        "sweeper_local.background",
        "--config",
        config_path,
        "--state-file",
        str(state_file),
    ]
    if visibility_timeout_seconds is not None:
        argv += ["--visibility-timeout", str(visibility_timeout_seconds)]
    if tick_seconds is not None:
        argv += ["--tick-seconds", str(tick_seconds)]
    if api_url is not None:
        argv += ["--api-url", api_url]
    env = dict(os.environ)
    if database_url:
        env["SWEEPER_LOCAL_DATABASE_URL"] = database_url  # not on the command line: a secret
    with log_path.open("ab") as log:
        process = subprocess.Popen(  # noqa: S603 - our own interpreter and module, no shell
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # outlives the command that started it
            env=env,
        )
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise LocalStackError(
                f"the local stack exited at start (exit code {process.returncode}); "
                f"its log is {log_path}"
            )
        found = read_local_file(state_file)
        if found is not None and found.pid == process.pid:
            return found
        time.sleep(0.2)
    process.terminate()
    raise LocalStackError(
        f"the local stack did not start in {timeout_seconds:.0f} s; see {log_path}"
    )


def stop_background(state_file: Path, timeout_seconds: float = STOP_TIMEOUT_SECONDS) -> int | None:
    """Stop the local stack the file names and remove the file; its pid, or None if none ran."""
    found = read_local_file(state_file)
    if found is None:
        return None
    if _alive(found.pid):
        os.kill(found.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_seconds
        while _alive(found.pid):
            if time.monotonic() > deadline:
                raise LocalStackError(f"the local stack (pid {found.pid}) did not stop")
            time.sleep(0.2)
    with contextlib.suppress(FileNotFoundError):
        state_file.unlink()
    return found.pid


def live_local_file(path: Path) -> LocalFile | None:
    """The local file at `path` when the stack that wrote it still runs, else None."""
    existing = read_local_file(path)
    return existing if existing is not None and _alive(existing.pid) else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(ChildProcessError):
        # Our own child that exited is a zombie until reaped: reap it, then it is gone.
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    return True


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sweeper_local.background")
    parser.add_argument("--config", required=True)
    parser.add_argument("--state-file", required=True, type=Path)
    parser.add_argument("--tick-seconds", type=float, default=None)
    parser.add_argument("--visibility-timeout", type=int, default=None)
    parser.add_argument("--api-url", default=None)
    args = parser.parse_args(argv)
    # The service's log (the file `local up` names): what failed, retried and came back.
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    return serve(
        args.config,
        args.state_file,
        database_url=os.environ.get("SWEEPER_LOCAL_DATABASE_URL"),
        tick_seconds=args.tick_seconds,
        visibility_timeout_seconds=args.visibility_timeout,
        api_url=args.api_url,
        secret_values=parse_local_secrets(os.environ.get(LOCAL_SECRETS_ENV)),
    )


if __name__ == "__main__":
    sys.exit(main())
