"""Where the operator's commands reach: the local stack's file, or a deployed stack on AWS.

`sweeper local up` writes `.sweeper/local.json` (a `sweeper.endpoints.LocalFile`); when it is
present every command uses its database URL, AWS endpoint, queues and tables. Otherwise the
commands use AWS (`--region`, `--profile`), the deployed stack's outputs (`--stack`) for queues,
functions and tables, and `--database-url` for the ledger. The commands run the same code
either way. The operator API's function builds its `Endpoints` itself, from its environment.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import boto3
from botocore.exceptions import BotoCoreError
from pydantic import ValidationError

from sweeper.endpoints import Endpoints, LocalFile
from sweeper.errors import OperatorError
from sweeper.ledger.wake import DynamoWakeStore

DEFAULT_LOCAL_FILE = ".sweeper/local.json"
DEFAULT_STACK = "Sweeper"
#: The local stack names each policy's consumer like this (the deployed one is in the outputs).
LOCAL_CONSUMER_FUNCTION = "sweeper-{policy}-consumer"


def write_local_file(local: LocalFile, path: Path) -> None:
    """Write atomically: a reader sees the old file or the whole new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    partial.write_text(local.model_dump_json(indent=2), encoding="utf-8")
    partial.replace(path)


def read_local_file(path: Path) -> LocalFile | None:
    """The local stack's file, or None when there is none."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        return LocalFile.model_validate(json.loads(text))
    except (ValueError, ValidationError) as exc:
        raise OperatorError(
            f"{path} is not a local stack file; remove it or run `sweeper local up`"
        ) from exc


def wake_store(endpoints: Endpoints) -> DynamoWakeStore | None:
    """The policies' wake items beside this ledger (sweeper.ledger.wake): in the limiter
    table; an operator's write lowers them like any other. None when no stack is in reach
    (a bare database URL without AWS): its writes lower nothing (docs/architecture.md)."""
    try:
        table = endpoints.limiter_table()
    except OperatorError:
        return None
    return None if table is None else DynamoWakeStore(endpoints.dynamodb(), table)


def operator_api_outputs(endpoints: Endpoints) -> dict[str, str]:
    """The outputs naming the operator API's URLs (the stack's, or the local stand-in's)."""
    if endpoints.local is not None:
        return dict(endpoints.local.operator_api or {})
    return endpoints.outputs()


def resolve(
    *,
    local_file: str | None,
    database_url: str | None,
    region: str | None,
    profile: str | None,
    stack: str | None,
) -> Endpoints:
    """The local stack when its file exists, else AWS."""
    path = Path(local_file or DEFAULT_LOCAL_FILE)
    local = read_local_file(path)
    if local is not None:
        _check_alive(local, path)
        session = boto3.Session(
            aws_access_key_id="testing",
            aws_secret_access_key="testing",  # noqa: S106 - the local emulator's fixed key
            region_name=local.region,
        )
        return Endpoints(
            "local",
            session,
            database_url or local.database_url,
            endpoint_url=local.aws_endpoint_url,
            service_endpoint_urls=dict(local.service_endpoint_urls),
            local=local,
        )
    try:
        session = boto3.Session(region_name=region, profile_name=profile)
    except BotoCoreError as exc:
        raise OperatorError(f"AWS session: {exc}") from exc
    return Endpoints("aws", session, database_url, stack=stack or DEFAULT_STACK)


def _check_alive(local: LocalFile, path: Path) -> None:
    try:
        os.kill(local.pid, 0)
    except ProcessLookupError as exc:
        raise OperatorError(
            f"{path} names a local stack that is not running (pid {local.pid}); "
            "run `sweeper local down` to clean up, then `sweeper local up`"
        ) from exc
    except PermissionError:
        pass  # it exists, under another user
