"""What every `sweeper` command shares: the top-level group (one-line errors, --debug), the
options, the console target, output helpers."""

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
from datetime import UTC, datetime
from functools import wraps
from typing import TYPE_CHECKING, Any, TypeVar

import click
from click.core import ParameterSource
from pydantic import ValidationError

from sweeper.config import Policy
from sweeper.config.loading import describe_validation_error
from sweeper.errors import SweeperError
from sweeper.redaction import redact
from sweeper_tools.policy_file import load_config

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
        except ValidationError as exc:  # a request the options built is refused by its model
            self._fail(exc, f"invalid request: {describe_validation_error(exc)}", 2, argv)
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


def friendly_errors[F: Callable[..., Any]](fn: F) -> F:
    """A SweeperError becomes a one-line message and exit code 2, never a traceback."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except SweeperError as exc:
            raise click.ClickException(f"{type(exc).__name__}: {exc}") from exc

    return wrapper  # type: ignore[return-value]


#: The packages of the harness (the `sweeper-local` distribution), absent where only the operator
#: CLI is installed (`pip install 'sweeper[cli]'`).
HARNESS_PACKAGES = frozenset({"sweeper_local", "sweeper_bench"})
LOCAL_STACK_MISSING = (
    "the local stack is not installed here (only the operator CLI is): run `make demo` "
    "(or `make install`) in a clone of the repository"
)


@contextmanager
def local_stack_required() -> Iterator[None]:
    """Around a command's import of the harness: without it, one line and exit 1."""
    try:
        yield
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] not in HARNESS_PACKAGES:
            raise
        raise click.ClickException(LOCAL_STACK_MISSING) from exc


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


consumer_function_option = click.option(
    "--consumer-function",
    envvar="SWEEPER_CONSUMER_FUNCTION",
    show_envvar=True,
    help="The consumer function whose event source mapping is switched (AWS; default: the "
    "stack's output).",
)


local_file_option = click.option(
    "--local-file",
    envvar="SWEEPER_LOCAL_FILE",
    show_envvar=True,
    default=".sweeper/local.json",
    type=click.Path(dir_okay=False),
    help="Where the local stack writes where it listens.",
)


OUTCOMES = [
    "accepted",
    "absent",
    "throttled",
    "transient",
    "unknown",
    "permanent",
    "auth",
    "snooze",
]


def emit(data: dict[str, Any], as_json: bool) -> None:
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


class Console:
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
        from sweeper_tools.endpoints import resolve

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
        from sweeper_tools.endpoints import wake_store

        if self._ledger is None:
            url = self.endpoints.require_database()
            # An operator's write lowers the policy's wake item, as every writer's does.
            self._ledger = Ledger(url, wake=wake_store(self.endpoints))
        return self._ledger

    def policy(self, name: str | None) -> Policy:
        if name is None:
            if len(self.config.policies) != 1:
                names = [p.name for p in self.config.policies]
                raise click.UsageError(f"--policy is required (the policy file has {names})")
            return self.config.policies[0]
        return self.config.policy(name)

    def backend(
        self,
        *,
        consumer_function: str | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> Any:
        """The commands' backend on the direct path: this console's policy file, endpoints and
        ledger (None when no ledger URL is known: only a release on AWS goes without one)."""
        from sweeper.operator_api.commands import Backend

        return Backend(
            config=self.config,
            endpoints=self.endpoints,
            open_ledger=(lambda: self.ledger) if self.endpoints.database_url else None,
            clock=current_time,
            consumer_function=consumer_function,
            progress=progress,
        )

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
def open_console(**kwargs: Any) -> Iterator[Console]:
    console = Console(**kwargs)
    try:
        yield console
    finally:
        console.close()


def current_time() -> datetime:
    return datetime.now(UTC)


def interactive(as_json: bool) -> bool:
    return not as_json and sys.stderr.isatty()


def parse_time(value: str, name: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise click.BadParameter(f"{value!r} is not an ISO 8601 time", param_hint=name) from exc
    if parsed.tzinfo is None:
        raise click.BadParameter("give a time zone (e.g. 2026-11-29T02:00:00Z)", param_hint=name)
    return parsed.astimezone(UTC)


@contextmanager
def progress_bar(as_json: bool, length: int, label: str) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr for a person; silent under --json or without a terminal.

    The callable takes the total done so far.
    """
    if not interactive(as_json):
        yield lambda done: None
        return
    with click.progressbar(length=max(1, length), label=label, file=sys.stderr) as bar:
        seen = [0]

        def advance(done: int) -> None:
            bar.update(max(0, done - seen[0]))
            seen[0] = max(seen[0], done)

        yield advance


def next_run_hint(console: Console, policy: Policy) -> str:
    """After scheduling into the local stack: when its producer runs next, and how not to wait."""
    from sweeper.operator_api.reads import next_run_at

    at = next_run_at(console.backend(), policy)
    when = f"at {at.isoformat()}" if at is not None else "at its next scheduled time"
    return (
        f"the local producer of {policy.name} releases due work {when}; "
        f"`sweeper release --policy {policy.name}` releases it now"
    )


def through_api() -> bool:
    """True when the command goes through the stack's operator API: `--stack` on the command
    line and no `--database-url` (the direct path)."""
    ctx = click.get_current_context()
    if ctx.get_parameter_source("stack") is not ParameterSource.COMMANDLINE:
        return False
    return not ctx.params.get("database_url")


def api_client(target: dict[str, Any]) -> Any:
    """The operator API's client for the target (`--stack` and the operator's AWS session)."""
    from sweeper_tools.endpoints import operator_api_outputs, resolve
    from sweeper_tools.operator_client import OperatorApiClient

    endpoints = resolve(
        local_file=target.get("local_file"),
        database_url=None,
        region=target.get("region"),
        profile=target.get("profile"),
        stack=target.get("stack"),
    )
    return OperatorApiClient.from_outputs(endpoints.session, operator_api_outputs(endpoints))


def execute(
    request: Any,
    *,
    target: dict[str, Any],
    actor: str | None = None,
    consumer_function: str | None = None,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Run one console command: through the operator API with `--stack`, else directly on
    the ledger; the same data either way (the API runs the same command function). Through the
    API the actor is the caller's IAM principal, never `--actor`."""
    from sweeper.operator_api.commands import run_command

    if through_api():
        result: dict[str, Any] = api_client(target).call(request)
        return result
    with open_console(**target) as console:
        backend = console.backend(consumer_function=consumer_function, progress=progress)
        return run_command(backend, request, actor=actor or getpass.getuser())
