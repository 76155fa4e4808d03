"""The action's config: what a policy calls for each due obligation (`HttpActionConfig`).

Today there is one action kind, an HTTP call to the vendor whose URL is built from
`url_template` (default `DEFAULT_URL_TEMPLATE`) and whose answers map to outcomes
(`OutcomeName`), with the operation key sent as its Idempotency-Key; its implementation is
`sweeper.actions.http`. A later action kind becomes one more member here, beside this one.
"""

from __future__ import annotations

import re
from typing import Literal, Self

from pydantic import Field, field_validator, model_validator

from sweeper.config.base import _Strict

DEFAULT_URL_TEMPLATE = "{api_url}/v1/tenants/{tenant_id}/objects/{object_id}"

OutcomeName = Literal[
    "accepted", "absent", "throttled", "transient", "unknown", "permanent", "auth"
]


class HttpActionConfig(_Strict):
    """The HTTP cleanup call: method and URL template; the operation key is the Idempotency-Key."""

    kind: Literal["http"] = "http"
    method: Literal["DELETE", "POST", "PUT", "PATCH", "GET"] = "DELETE"
    #: The vendor. The built-in default names no real host (".invalid" never resolves): a
    #: policy names its vendor, and the local stack puts its simulator here.
    api_url: str = Field(default="https://api.invalid", pattern=r"^https?://")
    #: An `http://` api_url sends the bearer token in clear: refused unless this says so (the
    #: local stack and the tests' loopback vendors set it).
    allow_plain_http: bool = False
    url_template: str = DEFAULT_URL_TEMPLATE
    connect_timeout_seconds: float = Field(default=2.0, gt=0, le=30)
    read_timeout_seconds: float = Field(default=10.0, gt=0, le=120)
    auth_secret_arn: str | None = Field(
        default=None, description="Secrets Manager secret with the API token (Bearer)"
    )
    #: Overrides of the default classification, e.g. {"409": "absent", "423": "throttled"}.
    outcomes: dict[int, OutcomeName] = Field(default_factory=dict)
    #: A vendor-specific rate-limit header read besides Retry-After, and its unit.
    retry_after_header: str | None = None
    retry_after_header_unit: Literal["s", "ms"] = "s"
    #: The response header that names the limit a 429 belongs to (e.g. `X-RateLimit-Scope`), and
    #: its values, each mapped to one of the policy's limit names (`store = "store"`). A 429
    #: whose header is missing or unmapped closes the narrowest limit the call holds.
    limit_header: str | None = Field(default=None, max_length=128)
    limit_header_values: dict[str, str] = Field(default_factory=dict, max_length=16)
    #: The vendor's measured latency (seconds): `sweeper plan` and synth use it to warn when the
    #: consumers cannot reach the quota. Unset: not checked.
    latency_p50_seconds: float | None = Field(default=None, gt=0, le=120)
    latency_p95_seconds: float | None = Field(default=None, gt=0, le=120)

    @model_validator(mode="after")
    def _plain_http_only_when_allowed(self) -> Self:
        if self.api_url.startswith("http://") and not self.allow_plain_http:
            raise ValueError(
                "api_url uses http://, which would send the API token in clear: use https://, "
                "or set allow_plain_http = true in [action] (a local vendor only)"
            )
        return self

    @model_validator(mode="after")
    def _p50_not_above_p95(self) -> Self:
        p50, p95 = self.latency_p50_seconds, self.latency_p95_seconds
        if p95 is not None and (p50 is None or p50 > p95):
            raise ValueError("latency_p95_seconds needs latency_p50_seconds, at most as large")
        return self

    @field_validator("outcomes")
    @classmethod
    def _statuses_are_http(cls, value: dict[int, str]) -> dict[int, str]:
        bad = sorted(status for status in value if not 100 <= status <= 599)
        if bad:
            raise ValueError(f"not HTTP statuses: {bad}")
        return value

    @field_validator("url_template")
    @classmethod
    def _check_url_template(cls, value: str) -> str:
        fields = set(re.findall(r"{(\w+)}", value))
        allowed = {"api_url", "tenant_id", "object_id", "operation_key"}
        if not fields <= allowed:
            raise ValueError(f"url template uses unknown fields {sorted(fields - allowed)}")
        return value
