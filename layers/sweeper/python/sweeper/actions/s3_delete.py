"""The `s3_delete` action kind: delete one object of the team's own bucket per job.

The kind's module (see sweeper.actions.base): its config (`S3DeleteActionConfig`), its
implementation (`S3DeleteAction`), its outcome mapping (`classify_client_error`) and its
plan defaults (S3's published rate of 3,500 DELETE/s per partitioned prefix as the default
quota); its grants and network path are its deploy-time provider (`sweeper_tools.deploy.s3_delete`).

The key comes from `key_template` over `{tenant_id}`, `{object_id}` and `{params.NAME}`. A field
fills one path segment (no "/"); a field written `{name+}` may fill several (`2026/11/a.csv`).
No segment a field fills may be empty, `.` or `..`, so a rendered key never climbs out of, nor
leaves, the template's fixed prefix; a job whose key cannot be rendered is PERMANENT (`bad_key`)
and nothing is sent.

S3's DeleteObject answers 204 whether or not the key exists, so "absent" would be a guess. The
action lists the key first (ListObjectsV2 with the key as prefix, one key): a key not listed is
ABSENT and no delete is sent; a listed one is deleted, ACCEPTED. On a versioned bucket the
delete carries no VersionId, so S3 adds a delete marker: the object is gone from GETs and
listings (discovery never finds it again, and a second job for it is ABSENT), while its earlier
versions stay until the bucket's lifecycle expires noncurrent versions (docs/actions.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
)
from pydantic import Field, field_validator

from sweeper.actions.base import (
    Action,
    ActionContext,
    AwsAction,
    AwsKind,
    PlanDefaults,
    aws_refusal,
)
from sweeper.models import ActionCall, ActionResult, OutcomeClass
from sweeper.s3_key_templates import check_fields_apart

#: S3's published rate: at least 3,500 PUT/COPY/POST/DELETE requests per second per partitioned
#: prefix (Amazon S3 User Guide, "Optimizing Amazon S3 performance").
S3_DELETES_PER_SECOND_PER_PREFIX: Final = 3_500

#: `{tenant_id}`, `{object_id+}`, `{params.date}`: a field, and whether it may span segments.
_FIELD_RE: Final = re.compile(r"{(tenant_id|object_id|params\.[A-Za-z_][A-Za-z0-9_]{0,63})(\+?)}")
_ANY_FIELD_RE: Final = re.compile(r"{[^{}]*}")
_DOT_SEGMENTS: Final = frozenset({"", ".", ".."})

#: Error codes S3 answers when it sheds load, or when the caller's identity is refused.
_THROTTLED_CODES: Final = frozenset(
    {"SlowDown", "503", "ServiceUnavailable", "RequestLimitExceeded"}
)
_AUTH_CODES: Final = frozenset(
    {
        "AccessDenied",
        "403",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "ExpiredToken",
        "InvalidToken",
        "AllAccessDisabled",
        "AccountProblem",
        # The bucket itself is missing: a configuration problem for every job, not this one's.
        "NoSuchBucket",
    }
)
_ABSENT_CODES: Final = frozenset({"NoSuchKey", "404", "NotFound"})
_BY_CODE: Final = {
    OutcomeClass.THROTTLED: _THROTTLED_CODES,
    OutcomeClass.AUTH: _AUTH_CODES,
    OutcomeClass.ABSENT: _ABSENT_CODES,
}


class S3DeleteActionConfig(AwsKind):
    """Delete `key_template`'s object in `bucket` (the team's own bucket)."""

    kind: Literal["s3_delete"] = "s3_delete"
    bucket: str = Field(pattern=r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
    #: e.g. "exports/{tenant_id}/{object_id+}"; starts with a fixed prefix the grants name.
    key_template: str = Field(min_length=1, max_length=1024)

    plan_defaults = PlanDefaults(quota_limit=S3_DELETES_PER_SECOND_PER_PREFIX)

    @field_validator("key_template")
    @classmethod
    def _template_fields_known(cls, value: str) -> str:
        unknown = [f for f in _ANY_FIELD_RE.findall(value) if not _FIELD_RE.fullmatch(f)]
        if unknown:
            raise ValueError(
                "key_template fields are {tenant_id}, {object_id}, {params.NAME}, each "
                f"optionally ending in + to span segments; not {sorted(unknown)}"
            )
        if not _FIELD_RE.search(value):
            raise ValueError("key_template must name at least one field, e.g. {object_id}")
        if not fixed_prefix(value):
            raise ValueError(
                "key_template must start with a fixed prefix (e.g. exports/) that the grant "
                "can be limited to"
            )
        return check_fields_apart(value)

    @property
    def prefix(self) -> str:
        """The key template's fixed part before its first field: every key starts with it."""
        return fixed_prefix(self.key_template)

    def build(self, context: ActionContext) -> Action:
        return S3DeleteAction(self)

    @property
    def call_seconds(self) -> float:
        # Two requests (the listing, then the delete), each with its own timeouts.
        return 2 * (self.connect_timeout_seconds + self.read_timeout_seconds)

    @property
    def scope_host(self) -> str:
        return f"{self.bucket}.s3"


def fixed_prefix(template: str) -> str:
    """The template's text before its first field."""
    match = _ANY_FIELD_RE.search(template)
    return template if match is None else template[: match.start()]


class BadKeyError(ValueError):
    """A job's ids or params cannot fill the key template as whole segments under its prefix."""


def render_key(template: str, job: ActionCall) -> str:
    """The job's key: each field's value as one segment (a `+` field: one or more), none of
    them empty, `.` or `..`. Raises BadKeyError, naming no value, when it cannot be."""

    def value(match: re.Match[str]) -> str:
        name, spans = match.group(1), bool(match.group(2))
        if name.startswith("params."):
            found = job.params.get(name.removeprefix("params."))
            if not isinstance(found, (str, int)) or isinstance(found, bool):
                raise BadKeyError(f"{name} is missing or not a string or integer")
            text = str(found)
        else:
            text = job.tenant_id if name == "tenant_id" else job.object_id
        segments = text.split("/")
        if not spans and len(segments) != 1:
            raise BadKeyError(f"{name} spans segments; write {{{name}+}} to allow it")
        if any(segment in _DOT_SEGMENTS for segment in segments):
            raise BadKeyError(f"{name} has an empty, . or .. segment")
        return text

    key = _FIELD_RE.sub(value, template)
    if not key.startswith(fixed_prefix(template)):  # cannot happen by construction; kept as guard
        raise BadKeyError("the key leaves the template's prefix")
    return key


def _code(exc: ClientError) -> str:
    error = exc.response.get("Error", {})
    return str(error.get("Code") or exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode"))


Step = Literal["list", "delete"]


def classify_client_error(exc: ClientError, step: Step) -> ActionResult:
    """S3's answer as an outcome: SlowDown/503 throttled, AccessDenied (and a missing bucket)
    auth, NoSuchKey absent; another 5xx is transient before the delete was sent (the listing)
    and unknown once it was; another 4xx is permanent."""
    server_error = OutcomeClass.TRANSIENT if step == "list" else OutcomeClass.UNKNOWN
    return aws_refusal(exc, _code(exc), _BY_CODE, server_error, service="s3")


def classify_transport_error(exc: BotoCoreError, step: Step) -> ActionResult:
    """A request that never reached S3 is transient; one that may have (a read timeout, a
    dropped connection) is unknown once the delete was sent."""
    if isinstance(exc, (EndpointConnectionError, ConnectTimeoutError)):
        return ActionResult(outcome=OutcomeClass.TRANSIENT, code="s3_connect_error")
    if isinstance(exc, ReadTimeoutError):
        outcome = OutcomeClass.TRANSIENT if step == "list" else OutcomeClass.UNKNOWN
        return ActionResult(outcome=outcome, code="s3_read_timeout")
    outcome = OutcomeClass.TRANSIENT if step == "list" else OutcomeClass.UNKNOWN
    return ActionResult(outcome=outcome, code=f"s3_{type(exc).__name__}"[:64])


@dataclass
class S3DeleteAction(AwsAction[S3DeleteActionConfig]):
    """Carry out a job by deleting its object; see `sweeper.actions.Action`."""

    service = "s3"

    def key_for(self, job: ActionCall) -> str:
        return render_key(self.config.key_template, job)

    def perform(self, job: ActionCall, timeout_seconds: float | None = None) -> ActionResult:
        """List the key, then delete it if it is there; never raises for S3's answer."""
        if timeout_seconds is not None and timeout_seconds <= 0:
            return ActionResult(outcome=OutcomeClass.TRANSIENT, code="no_time_left")
        try:
            key = self.key_for(job)
        except BadKeyError:
            return ActionResult(outcome=OutcomeClass.PERMANENT, code="bad_key")
        s3 = self.client()
        try:
            listed = s3.list_objects_v2(Bucket=self.config.bucket, Prefix=key, MaxKeys=1)
        except ClientError as exc:
            return classify_client_error(exc, "list")
        except BotoCoreError as exc:
            return classify_transport_error(exc, "list")
        contents = listed.get("Contents") or []
        if not contents or contents[0].get("Key") != key:
            return ActionResult(outcome=OutcomeClass.ABSENT, code="s3_not_listed")
        try:
            answer = s3.delete_object(Bucket=self.config.bucket, Key=key)
        except ClientError as exc:
            return classify_client_error(exc, "delete")
        except BotoCoreError as exc:
            return classify_transport_error(exc, "delete")
        status = answer.get("ResponseMetadata", {}).get("HTTPStatusCode")
        marker = answer.get("DeleteMarker")
        return ActionResult(
            outcome=OutcomeClass.ACCEPTED,
            status_code=status,
            code="s3_delete_marker" if marker else "s3_deleted",
        )
