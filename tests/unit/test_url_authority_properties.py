"""Property: over arbitrary templates, api_urls and field values, a policy is either refused
when read, or every URL it would send has exactly api_url's scheme, host and port (the
per-tenant form: exactly `<tenant label>.<suffix>`). Two parsers judge each URL: urllib3's,
which routes the request, and the standard library's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from hypothesis import event, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from urllib3.util import parse_url

from sweeper.actions.http import HttpAction
from sweeper.actions.templates import TemplateError, field_value
from sweeper.actions.url_template import DNS_LABEL_RE, VendorUrl
from sweeper.config import HttpActionConfig
from tests.unit.test_url_authority import job_for

#: What an attacker would put in an id or a param: authority and path delimiters, escapes,
#: dots, non-ASCII (no lone surrogate: `test_http_action` covers those).
NASTY = "/.@:#?%&=[]\\;{}+ -_~aZ9éİ\u3002\uff0e\x00\n"
VALUES = st.one_of(
    st.sampled_from(
        [
            ".evil.example",
            "@evil.example",
            "evil.example#",
            ":8443",
            "..",
            "%2e%2e",
            "..%2F..",
            "//evil.example/x",
            "x?y#z",
            "",
        ]
    ),
    st.text(st.sampled_from(NASTY), max_size=12),
    st.text(max_size=8).filter(lambda t: not any(0xD800 <= ord(c) <= 0xDFFF for c in t)),
)
FIELDS = ["{tenant_id}", "{object_id}", "{operation_key}", "{params.a}", "{params.b}", "{api_url}"]
LITERAL = st.text(st.sampled_from("/?#@:.%&=[]\\-_~a1é {}"), max_size=6)
PIECE = st.one_of(st.sampled_from(FIELDS), LITERAL, st.sampled_from(["/", "?a=", "&b=", "/x/"]))
PREFIX = st.sampled_from(
    ["{api_url}", "{api_url}/", "{api_url}?", "", "http://", "https://", "//", "{tenant_id}"]
)
#: Half of them written as a policy might (mostly accepted), half anything at all.
URL_TEXT_PIECE = st.one_of(
    st.sampled_from(FIELDS[:-1]), st.text(st.sampled_from("/?&=a1-._~:@%2e"), max_size=4)
)
TEMPLATES = st.one_of(
    st.builds(lambda head, rest: head + "".join(rest), PREFIX, st.lists(PIECE, max_size=8)),
    st.builds(
        lambda head, rest: head + "".join(rest),
        st.sampled_from(["{api_url}/", "{api_url}?q=", "{api_url}/v1/"]),
        st.lists(URL_TEXT_PIECE, max_size=8),
    ),
)
LABEL = st.from_regex(DNS_LABEL_RE, fullmatch=True)
TENANTS = st.one_of(LABEL, VALUES)


@dataclass(frozen=True)
class Origin:
    """An api_url as built: what every URL of the policy must have."""

    scheme: str
    host: str  # "" for the per-tenant form
    suffix: str  # the per-tenant form's suffix, else ""
    port: int | None
    path: str

    @property
    def text(self) -> str:
        host = f"{{tenant_id}}.{self.suffix}" if self.suffix else self.host
        port = f":{self.port}" if self.port is not None else ""
        return f"{self.scheme}://{host}{port}{self.path}"

    def expected(self, tenant_id: str) -> tuple[str, str, int]:
        host = f"{tenant_id}.{self.suffix}" if self.suffix else self.host
        host = host.replace("{tenant_id}", tenant_id)  # a fixed host written in the same form
        default = 443 if self.scheme == "https" else 80
        return self.scheme, host.lower().strip("[]"), self.port or default


HOSTS = st.one_of(
    st.builds(".".join, st.lists(LABEL, min_size=1, max_size=3)),
    st.builds(".".join, st.lists(LABEL, min_size=2, max_size=3)),
    st.sampled_from(["127.0.0.1", "[::1]", "localhost", "api.vendor.example"]),
    # hosts no policy should have: user info, ports, fields, delimiters (not `/`: what follows
    # it is api_url's path, so the host this names would not be the one written)
    st.text(st.sampled_from("ab.@:[]{}#?%-"), min_size=1, max_size=10),
    st.sampled_from(["{tenant_id}.vendor.example", "{object_id}.x.example", "a@{tenant_id}"]),
)
ORIGINS = st.one_of(
    st.builds(
        Origin,
        scheme=st.sampled_from(["http", "https"]),
        host=HOSTS,
        suffix=st.just(""),
        port=st.one_of(st.none(), st.integers(1, 65535)),
        path=st.sampled_from(["", "/", "/v2", "/a/b/", "/%7Ex"]),
    ),
    st.builds(
        Origin,
        scheme=st.sampled_from(["https", "http"]),
        host=st.just(""),
        suffix=st.one_of(
            st.builds(".".join, st.lists(LABEL, min_size=1, max_size=3)),
            st.sampled_from(["myshopify.com", "zendesk.com", "com", "a@b.example"]),
        ),
        port=st.one_of(st.none(), st.integers(1, 65535)),
        path=st.sampled_from(["", "/admin"]),
    ),
)


def _assert_authority(url: str, origin: Origin, tenant_id: str) -> None:
    expected = origin.expected(tenant_id)
    routed = parse_url(url)
    assert routed.auth is None
    assert (routed.scheme, (routed.host or "").strip("[]"), routed.port or 0) in (
        expected,
        (*expected[:2], 0),  # urllib3 leaves the scheme's default port out
    )
    split = urlsplit(url)
    assert (split.scheme, split.hostname, split.port or expected[2]) == expected
    assert split.username is None


def _accepted(origin: Origin, template: str, allow_plain_http: bool) -> HttpActionConfig | None:
    try:
        config = HttpActionConfig(
            api_url=origin.text, url_template=template, allow_plain_http=allow_plain_http
        )
    except ValidationError:
        event("refused when read")
        return None
    event("accepted")
    if "{tenant_id}" in origin.text:  # the per-tenant form is https only, whatever
        assert origin.scheme == "https"  # allow_plain_http says
    return config


@settings(max_examples=400, deadline=None)
@given(
    origin=ORIGINS,
    template=TEMPLATES,
    allow_plain_http=st.booleans(),
    tenant_id=TENANTS,
    object_id=VALUES,
    a=VALUES,
    b=st.one_of(VALUES, st.integers(), st.booleans()),
)
def test_every_url_a_policy_sends_has_api_urls_scheme_host_and_port(
    origin: Origin,
    template: str,
    allow_plain_http: bool,
    tenant_id: str,
    object_id: str,
    a: Any,
    b: Any,
) -> None:
    # Given any policy that is accepted when read
    config = _accepted(origin, template, allow_plain_http)
    if config is None:
        return
    # When any job's URL is made as the action sends it
    try:
        url = HttpAction(config).checked_url(job_for(tenant_id, object_id, a=a, b=b))
    except TemplateError as exc:
        event(f"refused: {exc.code}")
        return
    # Then it is not sent, or it goes to api_url's scheme, host and port
    if url is not None:
        _assert_authority(url, origin, tenant_id)
        if "{tenant_id}" in origin.text:
            assert DNS_LABEL_RE.fullmatch(tenant_id)


@settings(max_examples=400, deadline=None)
@given(
    origin=ORIGINS,
    template=TEMPLATES,
    tenant_id=TENANTS,
    object_id=VALUES,
    a=VALUES,
    b=VALUES,
)
def test_the_filled_url_keeps_the_authority_without_the_request_time_check(
    origin: Origin, template: str, tenant_id: str, object_id: str, a: str, b: str
) -> None:
    # Given an accepted policy, its URL filled but not yet checked (the load-time rules alone)
    config = _accepted(origin, template, allow_plain_http=True)
    if config is None:
        return
    vendor_url = VendorUrl(config.api_url, config.url_template, refuse_dot_segments=False)
    job = job_for(tenant_id, object_id, a=a, b=b)
    try:
        url = vendor_url.filled(tenant_id, lambda name: field_value(name, job))
    except TemplateError as exc:
        event(f"refused: {exc.code}")
        return
    # Then the rules alone already keep api_url's authority
    _assert_authority(url, origin, tenant_id)
