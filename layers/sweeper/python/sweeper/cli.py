"""`sweeper`: the operator's command line. Every command calls the same logic as the Lambdas."""

from __future__ import annotations

import getpass
import json
import os
import re
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime, timedelta
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click
from click.core import ParameterSource

from sweeper.config import Policy, Quota, load_config
from sweeper.errors import SweeperError
from sweeper.event_source import check_policy_event_source
from sweeper.redaction import redact

if TYPE_CHECKING:
    from sweeper.endpoints import Endpoints

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_CONFIG = "sweeper.toml"


#: Set by the global --debug flag: a failure then also prints its (redacted) traceback.
_debug: ContextVar[bool] = ContextVar("sweeper_debug", default=False)
#: Where a database URL may come from, so that its password is scrubbed from any message.
DATABASE_URL_ENV = ("DATABASE_URL", "SWEEPER_DATABASE_URL", "SWEEPER_LOCAL_DATABASE_URL")
_SCHEME_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]{0,20})://")


def _given_urls(args: Sequence[str]) -> list[str]:
    """Every database URL this run was given (arguments and environment), to scrub."""
    found = [os.environ.get(name, "") for name in DATABASE_URL_ENV]
    for i, arg in enumerate(args):
        if arg == "--database-url" and i + 1 < len(args):
            found.append(args[i + 1])
        elif arg.startswith("--database-url="):
            found.append(arg.partition("=")[2])
    return [url for url in found if url]


def _one_line(text: str) -> str:
    return " ".join(text.split())


class SweeperGroup(click.Group):
    """The top level: any failure is one line on stderr and a non-zero exit, with credentials
    redacted; the traceback only with --debug (redacted too)."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        argv = list(sys.argv[1:] if args is None else args)
        token = _debug.set(False)
        try:
            code = super().main(argv, prog_name, complete_var, False, **extra)
        except click.Abort:
            click.echo("Aborted.", err=True)
            sys.exit(1)
        except click.ClickException as exc:
            self._fail(exc, _describe_click_error(exc), exc.exit_code, argv)
        except Exception as exc:  # the catch-all: one line, never a traceback
            self._fail(exc, _describe_unexpected(exc), 1, argv)
        finally:
            _debug.reset(token)
        sys.exit(code if isinstance(code, int) else 0)

    @staticmethod
    def _fail(exc: BaseException, message: str, exit_code: int, argv: list[str]) -> None:
        urls = _given_urls(argv)
        if _debug.get():
            text = "".join(traceback.format_exception(exc))
            sys.stderr.write(redact(text, *urls))
        click.echo(redact(_one_line(f"Error: {message}"), *urls), err=True)
        sys.exit(exit_code)


def _describe_click_error(exc: click.ClickException) -> str:
    message = exc.format_message()
    if isinstance(exc, click.UsageError):
        where = exc.ctx.command_path if exc.ctx is not None else "the command"
        message += f" (see '{where} -h')"
    return message


def _describe_unexpected(exc: Exception) -> str:
    """The type (and SQLSTATE) only: an unexpected message may hold customer data."""
    kind = type(exc).__name__
    sqlstate = getattr(exc, "sqlstate", None)
    if sqlstate:
        kind += f" (SQLSTATE {sqlstate})"
    return f"unexpected {kind}; run again with --debug for the traceback"


class DatabaseUrl(click.ParamType[str | None]):
    """A PostgreSQL URL or connection string; refused early, without echoing it."""

    name = "URL"
    EXAMPLE = "a URL like postgresql://USER@HOST:5432/DBNAME"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from psycopg.conninfo import conninfo_to_dict

        text = str(value).strip()
        if not text:
            return None
        scheme = _SCHEME_RE.match(text)
        if scheme is not None and scheme[1].lower() not in ("postgresql", "postgres"):
            self.fail(f"a {scheme[1]}:// URL is not PostgreSQL; give {self.EXAMPLE}", param, ctx)
        try:
            conninfo_to_dict(text)
        except Exception:
            self.fail(f"not a PostgreSQL URL; give {self.EXAMPLE}", param, ctx)
        return text


def _friendly_errors[F: Callable[..., Any]](fn: F) -> F:
    """A SweeperError becomes a one-line message and exit code 2, never a traceback."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except SweeperError as exc:
            raise click.ClickException(f"{type(exc).__name__}: {exc}") from exc

    return wrapper  # type: ignore[return-value]


database_option = click.option(
    "--database-url",
    envvar=["DATABASE_URL", "SWEEPER_DATABASE_URL"],
    show_envvar=True,
    type=DatabaseUrl(),
    help="PostgreSQL URL of the ledger (postgresql://user:password@host:5432/dbname).",
)
config_option = click.option(
    "--config",
    "config_path",
    envvar="SWEEPER_CONFIG",
    show_envvar=True,
    default=DEFAULT_CONFIG,
    show_default=True,
    type=click.Path(dir_okay=False),
    help="The policy file (TOML).",
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
policy_option = click.option(
    "--policy",
    "policy_name",
    envvar="SWEEPER_POLICY_NAME",
    show_envvar=True,
    help="The policy (optional when the policy file has only one).",
)
actor_option = click.option(
    "--actor",
    envvar="SWEEPER_ACTOR",
    show_envvar=True,
    default=lambda: getpass.getuser(),
    show_default="the login name",
    help="Who is acting, as recorded in the ledger.",
)
reason_option = click.option("--reason", help="Why, as recorded in the ledger (no customer data).")


def target_options[F: Callable[..., Any]](fn: F) -> F:
    """Where a console command reaches: the local stack's file when present, else AWS."""
    options = [
        click.option(
            "--local-file",
            envvar="SWEEPER_LOCAL_FILE",
            show_envvar=True,
            default=".sweeper/local.json",
            type=click.Path(dir_okay=False),
            help="The file `sweeper local up` writes; when it exists, commands use it.",
        ),
        click.option(
            "--region", envvar="AWS_REGION", show_envvar=True, help="AWS region (not locally)."
        ),
        click.option(
            "--profile", envvar="AWS_PROFILE", show_envvar=True, help="AWS profile (not locally)."
        ),
        click.option(
            "--stack",
            envvar="SWEEPER_STACK",
            show_envvar=True,
            default="Sweeper",
            help="The deployed stack whose outputs name the queues, functions and tables.",
        ),
        database_option,
        config_option,
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def _emit(data: dict[str, Any], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(data, default=str))
        return
    width = max(len(k) for k in data)
    for key, value in data.items():
        click.echo(f"{key.ljust(width)}  {value}")


def _set_debug(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    _debug.set(bool(value))


@click.group(
    cls=SweeperGroup,
    context_settings={"help_option_names": ["-h", "--help"], "show_default": True},
)
@click.version_option(package_name="sweeper")
@click.option(
    "--debug",
    is_flag=True,
    envvar="SWEEPER_DEBUG",
    expose_value=False,
    is_eager=True,
    callback=_set_debug,
    help="On a failure, also print the traceback (credentials redacted).",
)
def main() -> None:
    """sweeper: scheduled cleanup obligations against a rate-limited API, none lost, none twice.

    Every failure is one line on stderr and a non-zero exit (2: a usage error); --debug adds
    the traceback.
    """


@main.command()
@click.option("--jobs", default=500, type=click.IntRange(1, 1_000_000), help="Obligations to seed.")
@click.option(
    "--tenants", default=5, type=click.IntRange(1, 100_000), help="Tenants to spread them over."
)
@click.option(
    "--consumers",
    default=4,
    type=click.IntRange(2, 64),
    help="Consumer concurrency (the event source's maximum concurrency).",
)
@click.option(
    "--batch-size", default=10, type=click.IntRange(1, 10), help="Records per consumer batch."
)
@click.option(
    "--rate",
    default=None,
    metavar="N/PERIOD",
    help="The vendor's quota for the default scope, e.g. 40/1s (simulator and limiter).",
)
@database_option
@click.option(
    "--api-url",
    envvar="SWEEPER_API_URL",
    show_envvar=True,
    help="An external vendor speaking the same contract, instead of the simulator.",
)
@click.option(
    "--timeout",
    "timeout_seconds",
    default=300.0,
    type=click.FloatRange(1),
    help="Give up after this many seconds.",
)
@json_option
@_friendly_errors
def demo(
    jobs: int,
    tenants: int,
    consumers: int,
    batch_size: int,
    rate: str | None,
    database_url: str | None,
    api_url: str | None,
    timeout_seconds: float,
    as_json: bool,
) -> None:
    """Run the whole pipeline locally (PostgreSQL, moto, vendor simulator) and report.

    Exits 0 only when every obligation is final.
    """
    from sweeper.local.demo import DemoOptions, run_demo

    options = DemoOptions(
        jobs=jobs,
        tenants=tenants,
        consumers=consumers,
        batch_size=batch_size,
        database_url=database_url,
        api_url=api_url.rstrip("/") if api_url else None,
        rate=Quota.parse(rate) if rate else None,
        timeout_seconds=timeout_seconds,
    )
    if as_json or not sys.stderr.isatty():
        report = run_demo(options)
    else:
        with click.progressbar(length=jobs, label="settling", file=sys.stderr) as bar:
            seen = [0]

            def progress(done: int, total: int) -> None:
                bar.update(done - seen[0])
                seen[0] = done

            report = run_demo(options, progress)
    _emit(report.as_dict(), as_json)
    if not report.all_final:
        sys.exit(1)


@main.command()
@database_option
@_friendly_errors
def migrate(database_url: str | None) -> None:
    """Apply the ledger's pending migrations (safe to run concurrently)."""
    from sweeper.ledger.migrate import current_version
    from sweeper.ledger.migrate import migrate as apply

    if not database_url:
        raise click.UsageError(
            "--database-url or DATABASE_URL is required", click.get_current_context()
        )
    applied = apply(database_url)
    click.echo(f"applied {applied or 'nothing'}; schema version {current_version(database_url)}")


@main.command()
@click.argument("source", type=click.File("rb"), default="-")
@click.option(
    "--policy", "policy_name", required=True, help="The policy the obligations belong to."
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["csv", "jsonl"]),
    default=None,
    help="Input format (default: from the file name, else jsonl).",
)
@target_options
@json_option
@_friendly_errors
def schedule(
    source: Any,
    policy_name: str,
    fmt: str | None,
    as_json: bool,
    **target: Any,
) -> None:
    """Add obligations from CSV (header tenant_id,object_id[,due_at]) or JSON lines; idempotent.

    The whole input is checked before anything is written, then written in one transaction:
    a bad line (or an empty input) writes nothing. A repeat never duplicates an obligation and
    can only move its due time earlier. Reaches the local stack when it runs.
    """
    from sweeper.errors import InputError
    from sweeper.scheduling import decode_input, parse_jobs, schedule_jobs

    name = str(getattr(source, "name", "-"))
    chosen: Any = fmt or ("csv" if name.endswith(".csv") else "jsonl")
    now = _now()
    with _console(**target) as console:
        policy = console.policy(policy_name)
        try:
            jobs = parse_jobs(decode_input(source.read()), chosen, now)
        except InputError as exc:
            where = "standard input" if name in ("-", "<stdin>") else name
            raise click.ClickException(
                f"{where}, {exc}; nothing was scheduled (fix the input and run again)"
            ) from exc
        result = schedule_jobs(console.ledger, policy, jobs, now)
        hint = _next_run_hint(console, policy) if console.endpoints.local is not None else None
    _emit(
        {
            "policy": policy.name,
            "inserted": result.inserted,
            "moved_earlier": result.moved_earlier,
            "unchanged": result.unchanged,
        },
        as_json,
    )
    if hint is not None and not as_json:
        click.echo(hint, err=True)


def _next_run_hint(console: _Console, policy: Policy) -> str:
    """After scheduling into the local stack: when its producer runs next, and how not to wait."""
    at = _next_run(console, policy)
    when = f"at {at.isoformat()}" if at is not None else "at its next scheduled time"
    return (
        f"the local producer of {policy.name} releases due work {when}; "
        f"`sweeper release --policy {policy.name}` releases it now"
    )


def _next_run(console: _Console, policy: Policy) -> datetime | None:
    from sweeper.release import next_run

    now = _now()
    local = console.endpoints.local
    tick = local.tick_seconds if local is not None else None
    return next_run(
        policy,
        now,
        last_scheduled=console.ledger.last_run_at_or_before(policy.name, now),
        every=timedelta(seconds=tick) if tick is not None else None,
        anchor=local.started_at if local is not None else None,
    )


@main.group()
def bench() -> None:
    """Benchmarks (figures printed, never asserted by timing)."""


@bench.command("ledger")
@click.option(
    "--sizes",
    default="10000,1000000",
    show_default=True,
    help="Ledger sizes (rows) to measure, comma-separated.",
)
@click.option("--page", default=1000, type=click.IntRange(1, 10_000), help="Rows per claim.")
@click.option("--pages", default=20, type=click.IntRange(1, 1000), help="Claims measured per size.")
@database_option
@json_option
@_friendly_errors
def bench_ledger(
    sizes: str, page: int, pages: int, database_url: str | None, as_json: bool
) -> None:
    """Claim-and-mark throughput with small and large ledgers: the claim costs the page."""
    from sweeper_bench.ledger import run_ledger_bench

    result = run_ledger_bench(
        [int(s) for s in sizes.split(",")], page=page, pages=pages, database_url=database_url
    )
    _emit(result, as_json)


@bench.command("rate")
@click.option("--consumers", default=8, type=click.IntRange(2, 64), help="Concurrent consumers.")
@click.option("--seconds", default=20.0, type=click.FloatRange(5), help="Each scenario's length.")
@click.option(
    "--quota",
    default="15/1s",
    metavar="N/PERIOD",
    help="The vendor's quota on the short window (the long window is 5 s at the same rate). "
    "15/s is what the local AWS emulator carries on 2 cores with room to spare.",
)
@database_option
@json_option
@_friendly_errors
def bench_rate(
    consumers: int, seconds: float, quota: str, database_url: str | None, as_json: bool
) -> None:
    """Close to the quota, never over it: sweeper's shared limiter against two baselines,
    then a vendor incident. Utilization, self-caused 429s, the most calls in any window."""
    from sweeper_bench.rate import run_rate_bench

    result = run_rate_bench(
        consumers=consumers, seconds=seconds, quota=quota, database_url=database_url
    )
    _emit(result, as_json)


# -- the operator's console ---------------------------------------------------------------------


class _Console:
    """What a console command works with: the target, the policy file, the ledger."""

    def __init__(
        self,
        *,
        local_file: str,
        region: str | None,
        profile: str | None,
        stack: str,
        database_url: str | None,
        config_path: str,
    ) -> None:
        from sweeper.endpoints import resolve

        self.endpoints: Endpoints = resolve(
            local_file=local_file,
            database_url=database_url,
            region=region,
            profile=profile,
            stack=stack,
        )
        source = click.get_current_context().get_parameter_source("config_path")
        local = self.endpoints.local
        if local is not None and source is ParameterSource.DEFAULT:
            config_path = local.config  # the policy file the local stack runs
        self.config = load_config(config_path)
        self._ledger: Any = None

    @property
    def ledger(self) -> Any:
        from sweeper.ledger.store import Ledger

        if self._ledger is None:
            self._ledger = Ledger(self.endpoints.require_database())
        return self._ledger

    def policy(self, name: str | None) -> Policy:
        if name is None:
            if len(self.config.policies) != 1:
                names = [p.name for p in self.config.policies]
                raise click.UsageError(f"--policy is required (the policy file has {names})")
            return self.config.policies[0]
        return self.config.policy(name)

    def gate(self) -> Any:
        from sweeper.limiter import DynamoLimiter

        table = self.endpoints.limiter_table()
        if table is None:
            return None
        return DynamoLimiter(self.endpoints.dynamodb(), table).state

    def close(self) -> None:
        if self._ledger is not None:
            self._ledger.close()


@contextmanager
def _console(**kwargs: Any) -> Iterator[_Console]:
    console = _Console(**kwargs)
    try:
        yield console
    finally:
        console.close()


def _now() -> datetime:
    return datetime.now(UTC)


def _interactive(as_json: bool) -> bool:
    return not as_json and sys.stderr.isatty()


def _parse_time(value: str, name: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise click.BadParameter(f"{value!r} is not an ISO 8601 time", param_hint=name) from exc
    if parsed.tzinfo is None:
        raise click.BadParameter("give a time zone (e.g. 2026-11-29T02:00:00Z)", param_hint=name)
    return parsed.astimezone(UTC)


@main.command()
@policy_option
@target_options
@json_option
@_friendly_errors
def status(policy_name: str | None, as_json: bool, **target: Any) -> None:
    """Per policy: jobs by status, oldest eligible age, in flight, queue and DLQ depth, gates
    (closed ones with their reopening time), and the last runs."""
    from sweeper.dead_letters import queue_depth
    from sweeper.operator import policy_status

    with _console(**target) as console:
        policies = (
            [console.policy(policy_name)] if policy_name is not None else console.config.policies
        )
        sqs = console.endpoints.sqs()
        gate = console.gate()
        found = []
        for policy in policies:
            where = console.endpoints.policy(policy.name)
            item = policy_status(
                policy,
                console.ledger,
                now=_now(),
                depth=lambda url: queue_depth(sqs, url),
                queue_url=where.queue_url,
                dlq_url=where.dlq_url,
                gate=gate,
            ).as_dict()
            at = _next_run(console, policy)
            item["schedule"] = policy.schedule
            item["next_run"] = None if at is None else at.isoformat()
            found.append(item)
    if as_json:
        click.echo(json.dumps({"target": console.endpoints.mode, "policies": found}, default=str))
        return
    for item in found:
        _print_status(item)


def _print_status(item: dict[str, Any]) -> None:
    paused = f"PAUSED since {item['paused_at']} by {item['paused_by']}" if item["paused"] else ""
    click.echo(f"policy {item['policy']}  {paused}".rstrip())
    counts = "  ".join(f"{k} {v}" for k, v in item["counts"].items())
    click.echo(f"  jobs            {counts}")
    click.echo(f"  oldest eligible {item['oldest_eligible_age_seconds'] or 0:.1f} s")
    click.echo(f"  leased          {item['leased_in_flight']} in flight")
    next_run = item["next_run"] or "unknown (no scheduled run recorded yet)"
    click.echo(f"  next run        {next_run}  ({item['schedule']}; `sweeper release` runs it now)")
    for name in ("queue", "dlq"):
        queue = item[name]
        if queue is not None:
            click.echo(f"  {name:<15} {queue['messages']} ({queue['in_flight']} in flight)")
    for gate in item["gates"]:
        state = (
            f"CLOSED until {gate['reopens_at']} ({gate['reason']})" if gate["closed"] else "open"
        )
        click.echo(f"  gate {gate['scope']:<10} {state}; {gate['unsettled_jobs']} unsettled")
    for run in item["runs"]:
        click.echo(
            f"  run {run['scheduled_at']}  published {run['published']}/{run['discovered']}"
            f"  {run['stop_reason']}  batch {run['batch_id']}"
        )


def _switch(console: _Console, policy: Policy, consumer_function: str | None) -> Any:
    """The consumer's event source mappings on AWS; None locally (the stack polls the flag)."""
    from sweeper.event_sources import EventSourceSwitch

    if console.endpoints.mode == "local":
        return None
    name = consumer_function or console.endpoints.policy(policy.name).consumer_function
    if not name:
        raise click.UsageError(
            "no consumer function in the stack outputs: pass --consumer-function"
        )
    return EventSourceSwitch(console.endpoints.lambda_client(), name)


consumer_function_option = click.option(
    "--consumer-function",
    envvar="SWEEPER_CONSUMER_FUNCTION",
    show_envvar=True,
    help="The consumer function whose event source mapping is switched (AWS; default: the "
    "stack's output).",
)


@main.command()
@policy_option
@reason_option
@actor_option
@consumer_function_option
@target_options
@json_option
@_friendly_errors
def pause(
    policy_name: str | None,
    reason: str | None,
    actor: str,
    consumer_function: str | None,
    as_json: bool,
    **target: Any,
) -> None:
    """Pause a policy: the producer skips (recording each skipped run), consumers stop, queued
    messages are kept. Undo with `resume`; release the skipped runs with `catch-up`."""
    from sweeper.operator import pause_policy

    with _console(**target) as console:
        policy = console.policy(policy_name)
        switch = _switch(console, policy, consumer_function)
        result = pause_policy(
            policy.name, console.ledger, switch, actor=actor, reason=reason, now=_now()
        )
    _emit(result.as_dict(), as_json)


@main.command()
@policy_option
@reason_option
@actor_option
@consumer_function_option
@target_options
@json_option
@_friendly_errors
def resume(
    policy_name: str | None,
    reason: str | None,
    actor: str,
    consumer_function: str | None,
    as_json: bool,
    **target: Any,
) -> None:
    """Resume a paused policy: consumers first, then the producer."""
    from sweeper.operator import resume_policy

    with _console(**target) as console:
        policy = console.policy(policy_name)
        switch = _switch(console, policy, consumer_function)
        result = resume_policy(
            policy.name, console.ledger, switch, actor=actor, reason=reason, now=_now()
        )
    _emit(result.as_dict(), as_json)


OUTCOMES = ["accepted", "absent", "throttled", "transient", "unknown", "permanent", "auth"]


@main.command()
@policy_option
@click.option("--tenant", "tenant_id", help="Only this tenant's jobs.")
@click.option("--scope", help="Only jobs of this limiter scope.")
@click.option(
    "--outcome",
    "outcomes",
    multiple=True,
    type=click.Choice(OUTCOMES),
    help="Only jobs whose last outcome is this class (repeatable).",
)
@click.option("--max", "max_messages", type=click.IntRange(1), help="Move at most this many.")
@click.option(
    "--rate",
    "rate_per_second",
    type=click.FloatRange(0, 1000, min_open=True),
    help="Moves per second (default: the policy's quota rate).",
)
@click.option("--dry-run", is_flag=True, help="Report what would move; change nothing.")
@click.option(
    "--include-terminal",
    is_flag=True,
    help="Also retry terminal jobs (fresh attempt budget, recorded) and move their messages.",
)
@click.option(
    "--budget",
    "budget_seconds",
    default=600.0,
    type=click.FloatRange(10),
    help="Stop moving after this many seconds.",
)
@target_options
@json_option
@_friendly_errors
def redrive(
    policy_name: str | None,
    tenant_id: str | None,
    scope: str | None,
    outcomes: tuple[str, ...],
    max_messages: int | None,
    rate_per_second: float | None,
    dry_run: bool,
    include_terminal: bool,
    budget_seconds: float,
    as_json: bool,
    **target: Any,
) -> None:
    """Move dead letters back to the work queue, as the redrive function does on demand.

    Settled jobs' letters are dropped; terminal jobs' stay (unless --include-terminal); letters
    of scopes whose gate is closed stay. Exits 1 when some letter could not be handled.
    """
    import time

    from sweeper.dead_letters import SqsDeadLetterQueue
    from sweeper.errors import OperatorError
    from sweeper.models import OutcomeClass
    from sweeper.redrive import RedriveReport, RedriveRequest, run_redrive

    with _console(**target) as console:
        policy = console.policy(policy_name)
        where = console.endpoints.policy(policy.name)
        gate = console.gate()
        if where.queue_url is None or where.dlq_url is None or gate is None:
            raise OperatorError(f"the target has no queue, DLQ or limiter table for {policy.name}")
        request = RedriveRequest(
            policy=policy.name,
            tenant_id=tenant_id,
            scope=scope,
            outcome=[OutcomeClass(o) for o in outcomes] or None,
            max_messages=max_messages,
            rate_per_second=rate_per_second,
            dry_run=dry_run,
            include_terminal=include_terminal,
        )
        dlq = SqsDeadLetterQueue(console.endpoints.sqs(), where.dlq_url, where.queue_url)
        deadline = time.monotonic() + budget_seconds
        with _bar(as_json, dlq.depth(), "redriving") as advance:

            def progress(report: RedriveReport) -> None:
                advance(report.examined + report.errors)

            report = run_redrive(
                request,
                console.ledger,
                dlq,
                gate,
                policy=policy.name,
                clock=_now,
                remaining_seconds=lambda: deadline - time.monotonic(),
                default_rate_per_second=policy.quota.rate_per_second,
                progress=progress,
            )
    _emit(report.as_dict(), as_json)
    if report.errors:
        click.echo(
            f"{report.errors} dead letter(s) could not be read or matched to a job; they stay "
            "in the DLQ (see `sweeper inspect` and the logs)",
            err=True,
        )
        sys.exit(1)


@contextmanager
def _bar(as_json: bool, length: int, label: str) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr for a person; silent under --json or without a terminal.

    The callable takes the total done so far.
    """
    if not _interactive(as_json):
        yield lambda done: None
        return
    with click.progressbar(length=max(1, length), label=label, file=sys.stderr) as bar:
        seen = [0]

        def advance(done: int) -> None:
            bar.update(max(0, done - seen[0]))
            seen[0] = max(seen[0], done)

        yield advance


@main.command("catch-up")
@policy_option
@click.option(
    "--since", required=True, help="Start of the range (ISO 8601 with a time zone), inclusive."
)
@click.option("--until", default=None, help="End of the range, inclusive (default: now).")
@click.option("--dry-run", is_flag=True, help="List the missed runs; release nothing.")
@actor_option
@target_options
@json_option
@_friendly_errors
def catch_up(
    policy_name: str | None,
    since: str,
    until: str | None,
    dry_run: bool,
    actor: str,
    as_json: bool,
    **target: Any,
) -> None:
    """Release the scheduled runs missed in a range (the scheduler does not replay them), in
    order, each with its own batch id. Runs skipped while paused count as missed."""
    from sweeper.errors import OperatorError
    from sweeper.operator import CatchUpRun, missed_runs
    from sweeper.operator import catch_up as release
    from sweeper.queue import SqsPublisher

    start = _parse_time(since, "--since")
    end = _parse_time(until, "--until") if until else _now()
    with _console(**target) as console:
        policy = console.policy(policy_name)
        where = console.endpoints.policy(policy.name)
        if where.queue_url is None:
            raise OperatorError(f"the target has no work queue for {policy.name}")
        publisher = SqsPublisher(console.endpoints.sqs(), where.queue_url)
        total = len(missed_runs(policy, console.ledger, start, end))
        with _bar(as_json, total, "catching up") as advance:
            done = [0]

            def progress(run: CatchUpRun) -> None:
                done[0] += 1
                advance(done[0])

            report = release(
                policy,
                console.ledger,
                publisher,
                start,
                end,
                actor=actor,
                clock=_now,
                dry_run=dry_run,
                progress=progress,
            )
    if as_json:
        click.echo(json.dumps(report.as_dict(), default=str))
        return
    click.echo(
        f"policy {report.policy}: {report.missed} missed run(s) in {report.since} .. {report.until}"
    )
    for run in report.runs:
        click.echo(
            f"  {run.scheduled_at}  {run.was:<7}  batch {run.batch_id}  "
            f"published {run.published}/{run.discovered}  {run.stop_reason}"
        )


@main.command()
@policy_option
@actor_option
@target_options
@json_option
@_friendly_errors
def release(policy_name: str | None, actor: str, as_json: bool, **target: Any) -> None:
    """Run the policy's producer now instead of waiting for its schedule: the local stack's
    producer, or on AWS the deployed producer function (Lambda Invoke). Refused while paused."""
    from botocore.config import Config as BotoConfig

    from sweeper.errors import OperatorError
    from sweeper.queue import SqsPublisher
    from sweeper.release import invoke_producer, release_now

    with _console(**target) as console:
        policy = console.policy(policy_name)
        where = console.endpoints.policy(policy.name)
        if console.endpoints.local is not None:
            if where.queue_url is None:
                raise OperatorError(f"the local stack has no work queue for {policy.name}")
            publisher = SqsPublisher(console.endpoints.sqs(), where.queue_url)
            report = release_now(policy, console.ledger, publisher, clock=_now).as_dict()
        else:
            if where.producer_function is None:
                raise OperatorError(
                    f"stack {console.endpoints.stack!r} names no producer function for "
                    f"{policy.name} (output {policy.name}ProducerFunctionName); check --stack"
                )
            # Without a ledger URL the function itself skips a paused policy (and says so).
            if console.endpoints.database_url and console.ledger.is_paused(policy.name):
                raise OperatorError(f"policy {policy.name} is paused: `sweeper resume` it first")
            # Wait as long as the producer may run; never retried (a retry is a second run).
            client = console.endpoints.lambda_client(
                BotoConfig(
                    read_timeout=int(policy.producer_budget_seconds) + 60,
                    retries={"total_max_attempts": 1},
                )
            )
            report = invoke_producer(
                client,
                where.producer_function,
                policy.name,
                _now(),
                region=console.endpoints.region,
            )
    del actor  # recorded by the producer's run, not as an operator action
    if as_json:
        click.echo(json.dumps(report, default=str))
        return
    click.echo(
        f"policy {policy.name}: released {report.get('published', 0)} of "
        f"{report.get('discovered', 0)} due job(s) ({report.get('stop_reason')}); "
        f"batch {report.get('batch_id')}"
    )


@main.command()
@policy_option
@click.option(
    "--stuck-after",
    "stuck_after_seconds",
    default=3600.0,
    type=click.FloatRange(0),
    help="A pending job overdue by this many seconds counts as stuck.",
)
@click.option("--limit", default=100, type=click.IntRange(1, 10_000), help="Rows per kind.")
@target_options
@json_option
@_friendly_errors
def inspect(
    policy_name: str | None,
    stuck_after_seconds: float,
    limit: int,
    as_json: bool,
    **target: Any,
) -> None:
    """Terminal and stuck jobs: outcome class, error code, attempts and times; no customer data."""
    from sweeper.operator import inspect_jobs

    with _console(**target) as console:
        policy = console.policy(policy_name)
        rows = inspect_jobs(
            policy.name,
            console.ledger,
            now=_now(),
            stuck_after=timedelta(seconds=stuck_after_seconds),
            limit=limit,
        )
    if as_json:
        click.echo(json.dumps({"policy": policy.name, "jobs": rows}, default=str))
        return
    if not rows:
        click.echo(f"policy {policy.name}: no terminal or stuck jobs")
    for row in rows:
        click.echo(
            f"{row['kind']:<8} {row['status']:<7} {row['outcome'] or '-':<9} "
            f"{row['error_code'] or '-':<14} attempts {row['attempts']:<3} "
            f"updated {row['updated_at']}  {row['operation_key']}"
        )


@main.command()
@policy_option
@click.option("--key", "keys", multiple=True, help="An operation key to retry (repeatable).")
@click.option(
    "--outcome",
    "outcomes",
    multiple=True,
    type=click.Choice(OUTCOMES),
    help="Retry terminal jobs whose last outcome is this class (repeatable).",
)
@click.option("--tenant", "tenant_id", help="Retry this tenant's terminal jobs.")
@click.option("--limit", default=1000, type=click.IntRange(1, 100_000), help="At most this many.")
@reason_option
@actor_option
@target_options
@json_option
@_friendly_errors
def retry(
    policy_name: str | None,
    keys: tuple[str, ...],
    outcomes: tuple[str, ...],
    tenant_id: str | None,
    limit: int,
    reason: str | None,
    actor: str,
    as_json: bool,
    **target: Any,
) -> None:
    """Move chosen terminal jobs back to pending with a fresh attempt budget, due now; each move
    is recorded in the ledger with who did it and what the job had come to."""
    from sweeper.models import OutcomeClass
    from sweeper.operator import retry_jobs

    with _console(**target) as console:
        policy = console.policy(policy_name)
        moved = retry_jobs(
            policy.name,
            console.ledger,
            actor=actor,
            now=_now(),
            keys=list(keys) or None,
            outcomes=[OutcomeClass(o) for o in outcomes] or None,
            tenant_id=tenant_id,
            limit=limit,
            reason=reason,
        )
    if as_json:
        click.echo(json.dumps({"policy": policy.name, "retried": len(moved), "keys": moved}))
        return
    click.echo(f"policy {policy.name}: {len(moved)} job(s) back to pending")


@main.command()
@click.option(
    "--older-than-days",
    required=True,
    type=click.FloatRange(1),
    help="Delete settled jobs completed (and runs scheduled) more than this many days ago.",
)
@policy_option
@click.option(
    "--batch-rows", default=1000, type=click.IntRange(1, 50_000), help="Rows per transaction."
)
@actor_option
@target_options
@json_option
@_friendly_errors
def prune(
    older_than_days: float,
    policy_name: str | None,
    batch_rows: int,
    actor: str,
    as_json: bool,
    **target: Any,
) -> None:
    """Metadata retention: delete old settled rows in small batches, each its own short
    transaction (SKIP LOCKED, so it never waits on live work). All policies unless --policy."""
    from sweeper.operator import PruneReport
    from sweeper.operator import prune as run_prune

    with _console(**target) as console:
        name = console.policy(policy_name).name if policy_name else None
        label = "pruning"
        if _interactive(as_json):
            click.echo(f"{label} (batches of {batch_rows})", err=True)
        with _bar(as_json, 0, label) as advance:

            def progress(report: PruneReport) -> None:
                advance(report.batches)

            report = run_prune(
                console.ledger,
                older_than=timedelta(days=older_than_days),
                now=_now(),
                actor=actor,
                policy=name,
                batch_rows=batch_rows,
                progress=progress,
            )
    _emit(report.as_dict(), as_json)


@main.command()
@click.option(
    "--stack",
    envvar="SWEEPER_STACK",
    show_envvar=True,
    default="Sweeper",
    help="The stack to deploy to; when it exists, its state is checked too.",
)
@click.option("--region", envvar="AWS_REGION", show_envvar=True, help="AWS region.")
@click.option("--profile", envvar="AWS_PROFILE", show_envvar=True, help="AWS profile.")
@config_option
@json_option
@_friendly_errors
def doctor(
    stack: str, region: str | None, profile: str | None, config_path: str, as_json: bool
) -> None:
    """Preflight before a deploy: what in this account would make it fail, each with its fix.

    Exits 1 when a check fails (warnings alone exit 0).
    """
    from sweeper.doctor import aws_clients, render, run_doctor

    client, region_name = aws_clients(region, profile)
    results = run_doctor(
        client, region=region_name, config_path=config_path, stack=stack, today=_now().date()
    )
    click.echo(render(results, as_json))
    if any(r.status == "fail" for r in results):
        sys.exit(1)


@main.group()
def local() -> None:
    """The local stack in the background, for the console commands (`local up` / `local down`)."""


local_file_option = click.option(
    "--local-file",
    envvar="SWEEPER_LOCAL_FILE",
    show_envvar=True,
    default=".sweeper/local.json",
    type=click.Path(dir_okay=False),
    help="Where the local stack writes where it listens.",
)


@local.command("up")
@config_option
@local_file_option
@database_option
@click.option(
    "--api-url",
    envvar="SWEEPER_API_URL",
    show_envvar=True,
    help="An external vendor speaking the same contract, instead of the simulator.",
)
@click.option(
    "--tick-seconds",
    type=click.FloatRange(0.1),
    default=None,
    help="Run each producer this often instead of at its policy's schedule.",
)
@click.option(
    "--visibility-timeout",
    "visibility_timeout_seconds",
    default=None,
    type=click.IntRange(1, 43_200),
    help="The work queues' visibility timeout [default: each policy's, as deployed: six "
    "consumer timeouts plus the batching window]; never below the consumer timeout.",
)
@json_option
@_friendly_errors
def local_up(
    config_path: str,
    local_file: str,
    database_url: str | None,
    api_url: str | None,
    tick_seconds: float | None,
    visibility_timeout_seconds: int | None,
    as_json: bool,
) -> None:
    """Start the local stack (PostgreSQL, AWS emulator, vendor simulator, consumers, producer
    tickers) in the background and write where it listens to --local-file."""
    from sweeper.local.background import start_background

    config = load_config(config_path)  # a bad policy file is refused here, not in the background
    if visibility_timeout_seconds is not None:
        for policy in config.policies:
            check_policy_event_source(policy, visibility_timeout_seconds)
    if _interactive(as_json):
        click.echo("starting the local stack ...", err=True)
    found = start_background(
        config_path,
        Path(local_file),
        database_url=database_url,
        tick_seconds=tick_seconds,
        visibility_timeout_seconds=visibility_timeout_seconds,
        api_url=api_url.rstrip("/") if api_url else None,
    )
    data = found.model_dump(mode="json")
    data["database_url"] = redact(data["database_url"])
    if as_json:
        click.echo(json.dumps(data))
        return
    click.echo(f"local stack running (pid {found.pid}); endpoints in {local_file}")
    for key in ("database_url", "aws_endpoint_url", "vendor_url", "log_file"):
        click.echo(f"  {key:<17} {data[key]}")
    for name, where in found.policies.items():
        click.echo(f"  policy {name}: queue {where.queue_url}  dlq {where.dlq_url}")


@local.command("down")
@local_file_option
@json_option
@_friendly_errors
def local_down(local_file: str, as_json: bool) -> None:
    """Stop the local stack started by `local up` and remove its file."""
    from sweeper.local.background import stop_background

    pid = stop_background(Path(local_file))
    if as_json:
        click.echo(json.dumps({"stopped": pid is not None, "pid": pid}))
        return
    click.echo("no local stack running" if pid is None else f"local stack (pid {pid}) stopped")


@local.command("scenario")
@click.argument("name", type=click.Choice(["dlq", "catch-up"]))
@database_option
@json_option
@_friendly_errors
def local_scenario(name: str, database_url: str | None, as_json: bool) -> None:
    """Run a scripted operator scenario on a local stack of its own, printing each command.

    dlq: a vendor incident fills the DLQ; status, redrive --dry-run, redrive; all succeed once.
    catch-up: pause, scheduled runs pass, resume, catch-up releases them in order.
    """
    from sweeper.local.scenarios import run_scenario

    report = run_scenario(name, database_url=database_url, echo=None if as_json else click.echo)
    if as_json:
        click.echo(json.dumps(report.as_dict(), default=str))
        return
    click.echo(f"scenario {name}: every check passed in {report.elapsed_seconds} s")


@main.command("drill")
@click.argument("name", required=False)
@click.option("--list", "list_only", is_flag=True, help="List the drills and their alarms.")
@json_option
@_friendly_errors
def drill(name: str | None, list_only: bool, as_json: bool) -> None:
    """Run a failure drill (NAME, or `all`) on a local stack of its own and print its figures;
    exit 0 only when every job ended final with one effect per object and nothing lost."""
    from sweeper.local import drills

    if list_only:
        rows = [
            {"name": d.name, "description": d.description, "alarm": d.alarm}
            for d in drills.DRILLS.values()
        ]
        if as_json:
            click.echo(json.dumps({"drills": rows}))
        for row in [] if as_json else rows:
            click.echo(f"{row['name']:<20} {row['description']}  [alarm: {row['alarm']}]")
        return
    if name is None:
        raise click.UsageError("name a drill, or `all` (`sweeper drill --list` shows them)")
    echo = None if as_json else lambda text: click.echo(text, err=True)
    reports = [drills.run_drill(n, echo=echo) for n in drills.resolve(name)]
    if as_json:
        passed = all(r.passed for r in reports)
        click.echo(
            json.dumps({"passed": passed, "drills": [r.as_dict() for r in reports]}, default=str)
        )
    else:
        for report in reports:
            click.echo("\n".join(drills.render(report)))
        if len(reports) > 1:
            click.echo("\n".join(drills.summary(reports)))
    if not all(r.passed for r in reports):
        sys.exit(1)


if __name__ == "__main__":
    main()
