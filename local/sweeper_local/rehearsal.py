"""What a rehearsal on the local stack may run: `--api-url` an origin, and only policies whose
every call the stack can send there or to its own stand-ins.

The http kind's calls go to the rehearsal's URL whatever host the policy names
(`sweeper.actions.rehearsal`, set on each pipeline's functions as `SWEEPER_REHEARSAL_URL`); the
AWS kinds' go to the AWS emulator (the stack's environment points every boto3 client there).
A kind whose calls are the team's own (a `python` callable) cannot be redirected: with
`--api-url` the stack refuses to start it rather than let it call whatever it calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from sweeper.actions.rehearsal import Rehearsal
from sweeper.config import Policy
from sweeper_local.errors import LocalStackError
from sweeper_tools.deploy import deploy_for

#: The variable that tells a pipeline's functions where a rehearsal sends every vendor call.
REHEARSAL_URL_VARIABLE: Final = "SWEEPER_REHEARSAL_URL"


def rehearsal_of(api_url: str) -> Rehearsal:
    """`--api-url` as a rehearsal's origin; LocalStackError naming it when it is not one."""
    try:
        return Rehearsal.parse(api_url)
    except ValueError as exc:
        raise LocalStackError(f"--api-url {exc}") from exc


def check_rehearsal(policies: Sequence[Policy], api_url: str | None) -> None:
    """LocalStackError, one line, when `api_url` (an outside vendor; None: the simulator) is
    not an origin, or a policy's calls could not all be sent there."""
    if api_url is None:
        return
    rehearsal_of(api_url)
    refused = [
        f"policy {policy.name}: {problem}"
        for policy in policies
        if (problem := deploy_for(policy.action).rehearsal_problem()) is not None
    ]
    if refused:
        raise LocalStackError(
            f"--api-url cannot receive every call: {'; '.join(refused)} "
            "(rehearse it without --api-url, or leave the policy out of the file)"
        )
