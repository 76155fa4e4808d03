"""`sweeper console`: a web page on loopback to look at the ledger and act on jobs.

The page (`page`), its guard (`guard`), its server (`server`) and what it reads through
(`backend`) live here, in the operator's CLI, never in the Lambda layer.
"""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any

import click

from sweeper_cli.base import (
    actor_option,
    friendly_errors,
    main,
    open_console,
    target_options,
    through_api,
)


@main.command("console")
@click.option(
    "--port",
    default=0,
    type=click.IntRange(0, 65535),
    help="The loopback port to listen on (0: a free one).",
)
@click.option(
    "--open",
    "open_browser",
    is_flag=True,
    help="Open the page in the browser (through a private file: no secret on its command line).",
)
@actor_option
@target_options
@friendly_errors
def console_page(port: int, open_browser: bool, actor: str, **target: Any) -> None:
    """Serve the console page on 127.0.0.1: jobs by state, ages, activity, limits and gates,
    DLQ, runs and their reconciliation, search, a job's history, and actions (each confirmed
    and recorded with the operator and a reason). Open the URL it prints; Ctrl-C stops it.

    With --stack S (and no --database-url) the page reads and acts through the stack's
    operator API with your own AWS credentials (the read-only policy shows it; the operator
    policy also acts), and the operator recorded is your IAM principal, not --actor."""
    from sweeper_cli.webconsole.backend import ConsoleBackend, api_backend, ledger_backend
    from sweeper_cli.webconsole.guard import LOGIN_CODE_SECONDS
    from sweeper_cli.webconsole.launch import launch_file, open_in_browser
    from sweeper_cli.webconsole.server import ConsoleServer

    with open_console(**target) as console:
        first = console.config.policies[0].name
        backend: ConsoleBackend
        if through_api():
            backend = api_backend(console.endpoints, console.config)
            backend.overview(first)  # reach it now, or fail
        else:
            console.ledger.policy_state(first)  # reach it now, or fail
            backend = ledger_backend(console.endpoints, console.config, console.ledger, actor)
        try:
            server = ConsoleServer(backend, port)
        except OSError as exc:
            raise click.ClickException(
                f"cannot listen on 127.0.0.1:{port} ({exc.strerror}): choose another --port"
            ) from exc
        click.echo(f"sweeper console at {server.url}")
        click.echo(
            f"(that URL's code signs one browser in, once, within {LOGIN_CODE_SECONDS / 60:.0f} "
            f"minutes; that browser then finds the page at {server.home}; Ctrl-C stops it)"
        )
        with ExitStack() as opened:
            if open_browser:
                open_in_browser(opened.enter_context(launch_file(server.url)))
            try:
                server.serve_forever()
            except KeyboardInterrupt:
                click.echo("stopped")
            finally:
                server.server_close()
