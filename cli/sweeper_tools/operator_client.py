"""The way in for an operator's own machine (`sweeper <command> --stack S`, the web console):
a request SigV4-signed with the operator's AWS credentials and POSTed to the operator API's
function URL. Read commands go to the read-only URL, so a read-only principal can run them;
every other command to the operator URL.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import boto3
import urllib3
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.exceptions import BotoCoreError

from sweeper import errors
from sweeper.errors import OperatorError, SweeperError
from sweeper.operator_api.commands import ConfirmationNeededError
from sweeper.operator_api.requests import READ_COMMANDS, OperatorRequest

#: The stack outputs naming the two function URLs.
OPERATOR_URL_OUTPUT = "OperatorApiUrl"
READ_ONLY_URL_OUTPUT = "OperatorApiReadOnlyUrl"
#: Lambda's longest run, and then some: a redrive may take its whole budget.
READ_TIMEOUT_SECONDS = 910.0
CONNECT_TIMEOUT_SECONDS = 10.0

#: (url, body, headers) -> (status, body): how a signed request travels (urllib3 by default).
Transport = Callable[[str, bytes, dict[str, str]], tuple[int, bytes]]


def _urllib3_transport() -> Transport:
    pool = urllib3.PoolManager(
        timeout=urllib3.Timeout(connect=CONNECT_TIMEOUT_SECONDS, read=READ_TIMEOUT_SECONDS),
        retries=False,  # a change is never sent twice
    )

    def send(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        response = pool.request("POST", url, body=body, headers=headers)
        return response.status, response.data

    return send


class OperatorApiClient:
    """Calls the operator API as the session's IAM principal; the command's data, or
    OperatorError (ConfirmationNeededError when a job control must be confirmed)."""

    def __init__(
        self,
        session: boto3.Session,
        *,
        operator_url: str | None,
        read_only_url: str | None,
        transport: Transport | None = None,
    ) -> None:
        self._session = session
        self._operator_url = operator_url
        self._read_only_url = read_only_url
        self._transport = transport or _urllib3_transport()

    @classmethod
    def from_outputs(
        cls, session: boto3.Session, outputs: dict[str, str], transport: Transport | None = None
    ) -> OperatorApiClient:
        """The client for a deployed stack, from its outputs."""
        return cls(
            session,
            operator_url=outputs.get(OPERATOR_URL_OUTPUT),
            read_only_url=outputs.get(READ_ONLY_URL_OUTPUT),
            transport=transport,
        )

    def call(self, request: OperatorRequest) -> dict[str, Any]:
        """Run one console command through the API; the data `--json` prints."""
        read = request.command in READ_COMMANDS
        url = self._read_only_url if read else self._operator_url
        if not url:
            output = READ_ONLY_URL_OUTPUT if read else OPERATOR_URL_OUTPUT
            raise OperatorError(
                f"the stack has no operator API (output {output}): deploy this version, or "
                "use --database-url"
            )
        body = request.model_dump_json().encode()
        try:
            status, raw = self._transport(url, body, self._sign(url, body))
        except urllib3.exceptions.HTTPError as exc:
            raise OperatorError(
                f"cannot reach the operator API: {type(exc).__name__} (check --region and "
                "your network)"
            ) from exc
        try:
            reply: Any = json.loads(raw) if raw else None
        except ValueError:
            reply = None
        if status == 200 and isinstance(reply, dict) and isinstance(reply.get("result"), dict):
            result: dict[str, Any] = reply["result"]
            return result
        if not isinstance(reply, dict) or "outcome" not in reply:
            # Refused before the function ran: IAM said no.
            raise OperatorError(
                f"the operator API refused the request (HTTP {status}): your AWS principal "
                f"needs the stack's {'read-only or ' if read else ''}operator policy"
            )
        if reply["outcome"] == "confirm":
            policy = getattr(request, "policy", None) or ""
            raise ConfirmationNeededError(
                request.command, policy, int(reply.get("moved", 0)), int(reply.get("threshold", 0))
            )
        raise _error(reply.get("error_type"), str(reply.get("error") or f"HTTP {status}"))

    def _sign(self, url: str, body: bytes) -> dict[str, str]:
        """SigV4 headers for a POST of `body` to the function URL (service `lambda`)."""
        try:
            credentials = self._session.get_credentials()
        except BotoCoreError as exc:
            raise OperatorError(f"AWS credentials: {type(exc).__name__}") from exc
        if credentials is None:
            raise OperatorError("no AWS credentials: pass --profile or set AWS_PROFILE")
        region = self._session.region_name
        if not region:
            raise OperatorError("no AWS region: pass --region or set AWS_REGION")
        signed = AWSRequest(
            method="POST", url=url, data=body, headers={"content-type": "application/json"}
        )
        SigV4Auth(credentials.get_frozen_credentials(), "lambda", region).add_auth(signed)
        return {key: str(value) for key, value in signed.headers.items()}


def caller_arn(session: boto3.Session, *, endpoint_url: str | None = None) -> str:
    """The session's IAM principal ARN (STS GetCallerIdentity, which needs no permission):
    whom the operator API records as the actor of each change."""
    from botocore.exceptions import ClientError

    try:
        identity = session.client("sts", endpoint_url=endpoint_url).get_caller_identity()
    except (BotoCoreError, ClientError) as exc:
        raise OperatorError(
            f"cannot tell who you are on AWS (STS GetCallerIdentity: {type(exc).__name__}): "
            "check --profile and --region"
        ) from exc
    return str(identity["Arn"])


def _error(type_name: Any, message: str) -> SweeperError:
    """The function's error as the direct path raises it: its class when it is one of ours."""
    kind = getattr(errors, str(type_name), None) if type_name else None
    if isinstance(kind, type) and issubclass(kind, SweeperError):
        try:
            return kind(message)
        except TypeError:  # a class that takes more than a message
            pass
    return OperatorError(message)
