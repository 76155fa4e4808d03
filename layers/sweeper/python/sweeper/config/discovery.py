"""Where a policy's obligations are found: a SQL query or an S3 listing (`DiscoveryConfig`).

Both sources share `_DiscoveryBase` (when a pass runs, its time budget, its page size, its lag
alarm); `SqlDiscovery` reads a system-of-record PostgreSQL with one SELECT, `S3Discovery` lists
a bucket's keys under a prefix. `DiscoveryConfig` is their union, discriminated on `kind`; the
implementations are in `sweeper.discovery`.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal, Self

from pydantic import Field, field_validator, model_validator

from sweeper.config.base import _Strict
from sweeper.limits import LAMBDA_MAX_TIMEOUT_SECONDS
from sweeper.s3_key_templates import check_fields_apart

#: A column of the discovery query that becomes a param (a plain SQL identifier).
ParamColumn = Annotated[str, Field(pattern=r"^[a-z_][a-z0-9_]{0,62}$")]
#: An S3 user metadata key as S3 returns it (lower case).
MetadataKey = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_.-]{0,127}$")]

#: Fields an S3 key template may name; each matches one or more characters other than "/".
KEY_TEMPLATE_FIELDS = frozenset({"tenant_id", "object_id"})
#: A key template's fields: `{object_id}` one segment, `{object_id+}` one or more.
KEY_TEMPLATE_FIELD_RE = re.compile(r"{(\w+)(\+?)}")


class _DiscoveryBase(_Strict):
    """What every discovery source shares: when a pass runs and how much one run may do."""

    #: EventBridge Scheduler expression of the discovery function (separate from the producer's).
    schedule: str = Field(default="rate(1 hour)", pattern=r"^(rate|cron|at)\(.+\)$")
    #: One run reads pages until this is spent; the next run resumes at the persisted cursor.
    budget_seconds: float = Field(default=240.0, gt=0, le=LAMBDA_MAX_TIMEOUT_SECONDS)
    page_size: int = Field(default=1000, ge=1, le=10_000)
    #: Discovery lag alarm: no complete pass for this long (a pass may span several runs).
    lag_alarm_seconds: int = Field(default=86_400, gt=0)


class SqlDiscovery(_DiscoveryBase):
    """A read-only query against a system-of-record PostgreSQL (never the ledger).

    `query` is one SELECT returning the columns `tenant_id`, `object_id` and `due_at`, none of
    them NULL; sweeper wraps it and pages it by keyset on (due_at, tenant_id, object_id), so an
    index on those columns makes every page cost its own size. Named parameters (`%(name)s`)
    come from `params`; `%(now)s` is the run's time. Never format values into the query.
    """

    kind: Literal["sql"] = "sql"
    query: str = Field(min_length=1, max_length=20_000)
    params: dict[str, str | int | float | bool] = Field(default_factory=dict)
    #: Secrets Manager secret of a read-only user on the source database (RDS JSON shape).
    secret_arn: str | None = None
    #: The source's PostgreSQL port: the function's only egress besides HTTPS to AWS.
    port: int = Field(default=5432, ge=1, le=65_535)
    statement_timeout_seconds: float = Field(default=30.0, gt=0, le=900)
    #: Further columns of the query that become each obligation's params, by their names (a
    #: NULL column is left out of the params). Checked as every door checks params.
    param_columns: list[ParamColumn] = Field(default_factory=list, max_length=32)

    @field_validator("param_columns")
    @classmethod
    def _not_a_key_column(cls, value: list[str]) -> list[str]:
        taken = sorted(set(value) & {"tenant_id", "object_id", "due_at"})
        if taken:
            raise ValueError(f"param_columns must not name the key columns {taken}")
        if len(set(value)) != len(value):
            raise ValueError("param_columns names a column twice")
        return value

    @field_validator("query")
    @classmethod
    def _one_select(cls, value: str) -> str:
        body = value.strip().rstrip(";").strip()
        if ";" in body:
            raise ValueError("query must be one statement (no ';' inside)")
        if not re.match(r"(?is)^(select|with)\b", body):
            raise ValueError("query must be a SELECT (or WITH ... SELECT)")
        return body

    @field_validator("params")
    @classmethod
    def _now_is_reserved(cls, value: dict[str, object]) -> dict[str, object]:
        if "now" in value:
            raise ValueError("params must not set 'now': it is the run's time")
        return value


class S3Discovery(_DiscoveryBase):
    """Objects under a bucket and prefix old enough for the policy's age rule.

    `key_template` is matched against the whole key: `{tenant_id}` and `{object_id}` each match
    one or more characters other than "/"; the template's last field written with a `+`
    (`exports/{tenant_id}/{object_id+}`) matches one or more segments (`2026/11/a.csv`), none
    of them empty, `.` or `..` (such a key is rejected). An object is due `min_age_seconds`
    after its LastModified time; objects due later than `lookahead_seconds` from now wait for a
    later pass.
    """

    kind: Literal["s3"] = "s3"
    bucket: str = Field(pattern=r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
    prefix: str = Field(default="", max_length=1024)
    key_template: str = Field(min_length=1, max_length=1024)
    min_age_seconds: int = Field(default=30 * 86_400, ge=0)
    lookahead_seconds: int = Field(default=0, ge=0)
    #: User metadata keys (`x-amz-meta-<name>`, lower case) that become each due object's
    #: params, as strings; a key the object lacks is left out. Each due object then costs one
    #: HeadObject (s3:GetObject on the bucket and prefix), so name none unless needed.
    metadata_params: list[MetadataKey] = Field(default_factory=list, max_length=32)

    @field_validator("key_template")
    @classmethod
    def _template_names_both_ids(cls, value: str) -> str:
        found = KEY_TEMPLATE_FIELD_RE.findall(value)
        if sorted(name for name, _ in found) != sorted(KEY_TEMPLATE_FIELDS):
            raise ValueError("key_template must name {tenant_id} and {object_id} once each")
        if any(plus for _, plus in found[:-1]):
            raise ValueError("only the key_template's last field may span segments ({name+})")
        return check_fields_apart(value)

    @model_validator(mode="after")
    def _template_under_prefix(self) -> Self:
        if not self.key_template.startswith(self.prefix):
            raise ValueError("key_template must start with prefix")
        return self


DiscoveryConfig = Annotated[SqlDiscovery | S3Discovery, Field(discriminator="kind")]
