"""The `http` kind's URL: filled by structure, its scheme, host and port always the policy's.

Checked when the policy is read (`parse_api_url`, `parse_url_template`, each raising
ValueError with a message naming its key):

- `api_url` is an origin with an optional base path, `http(s)://host[:port][/path]`, without
  user info, query or fragment; or the per-tenant form `https://{tenant_id}.<suffix>[:port]`
  (a vendor that puts the tenant in the host: `{shop}.myshopify.com`), where `{tenant_id}` is
  the whole first label, the suffix a fixed name of at least two labels, and https always.
- `url_template` begins with `{api_url}` followed by `/`, `?` or its end. Every other field
  stands inside a path segment or inside a query value (after `=`): never in a query key, never
  beside the authority, and a template has no fragment (`#`). Literal text is URL text.

Filled per job (`VendorUrl.url_for`): a path field is percent-encoded as (part of) one path
segment (`path_segment`), a query field as one query value; so `/`, `?`, `#`, `&`, `@` in an id
are data. With `refuse_dot_segments`, a path segment that holds `.` or `..` once decoded as a
lenient proxy might (percent-decoding repeated, `\\` read as `/`, `;params` dropped) is refused
(`dot_segment`). In the per-tenant form a tenant id that is not one DNS label is refused
(`bad_host_label`). Last, the filled URL's scheme, host and port, as urllib3 parses them to
route the request, must equal the expected ones, or the call is refused (`url_authority`):
the rules above make that unreachable, the check keeps it so if they ever regress.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote, unquote

from urllib3.exceptions import LocationValueError
from urllib3.util import parse_url

from sweeper.actions.templates import (
    PLACEHOLDER_RE,
    TENANT_FIELD,
    TemplateError,
    segment_text,
    unknown_fields,
)

API_URL_FIELD: Final = "{api_url}"
DEFAULT_PORTS: Final = {"http": 80, "https": 443}
#: One DNS label: letters, digits and inner hyphens, 1 to 63 characters.
DNS_LABEL_RE: Final = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")
_HOST_NAME_RE: Final = re.compile(r"[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*\.?")
_IPV6_RE: Final = re.compile(r"\[[0-9A-Fa-f:.]+\]")
_API_URL_RE: Final = re.compile(r"(?P<scheme>https?)://(?P<authority>[^/?#]*)(?P<path>.*)", re.S)
_PORT_RE: Final = re.compile(r"(?P<host>.*?)(?::(?P<port>[0-9]{1,5}))?")
#: Literal URL text: RFC 3986 unreserved, sub-delims, ':', '@', '/', '?', and `%XX` escapes.
_URL_TEXT_RE: Final = re.compile(r"(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/?]|%[0-9A-Fa-f]{2})*")
_SEPARATORS_RE: Final = re.compile(r"[/\\]")


@dataclass(frozen=True, slots=True)
class Authority:
    """Where a request goes: what urllib3 routes it by."""

    scheme: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class ApiUrl:
    """A checked `api_url`: a fixed origin, or the per-tenant form (`tenant_suffix` set)."""

    scheme: str
    #: The fixed host (lowercase), or "" in the per-tenant form.
    host: str
    #: The per-tenant form's suffix after `{tenant_id}.` (lowercase), else "".
    tenant_suffix: str
    #: The port as written ("" when the scheme's default).
    port_text: str
    #: The base path, without a trailing slash.
    path: str

    @property
    def per_tenant(self) -> bool:
        return bool(self.tenant_suffix)

    def host_for(self, tenant_id: str) -> str:
        """The host a job of `tenant_id` is sent to; TemplateError when the tenant id is not
        one DNS label (per-tenant form)."""
        if not self.per_tenant:
            return self.host
        if not DNS_LABEL_RE.fullmatch(tenant_id):
            raise TemplateError(
                "bad_host_label", "the tenant id is not one DNS label: it names no host"
            )
        return f"{tenant_id}.{self.tenant_suffix}"

    def base_for(self, tenant_id: str) -> str:
        """The origin and base path a job's URL starts with."""
        port = f":{self.port_text}" if self.port_text else ""
        return f"{self.scheme}://{self.host_for(tenant_id)}{port}{self.path}"

    def authority_for(self, tenant_id: str) -> Authority:
        """The scheme, host and port every URL of the job must have."""
        port = int(self.port_text) if self.port_text else DEFAULT_PORTS[self.scheme]
        return Authority(self.scheme, self.host_for(tenant_id).lower(), port)


def parse_api_url(text: str) -> ApiUrl:
    """`text` checked as an api_url; ValueError naming what is wrong."""
    match = _API_URL_RE.fullmatch(text)
    if match is None:
        raise ValueError("api_url must be http(s)://host[:port][/path]")
    authority, path = match["authority"], match["path"].rstrip("/")
    if "@" in authority:
        raise ValueError("api_url may not hold user info (user@): credentials go in auth")
    if path and (not path.startswith("/") or "{" in path or not _URL_TEXT_RE.fullmatch(path)):
        if TENANT_FIELD in path:
            raise ValueError("api_url may name {tenant_id} only in its host (the first label)")
        raise ValueError("api_url's path must be plain URL text: no query, fragment or field")
    if any(climbs(segment) for segment in path.split("/")):
        raise ValueError("api_url's path has a dot segment (. or ..)")
    parts = _PORT_RE.fullmatch(authority)
    assert parts is not None  # the pattern matches any text
    host, port_text = parts["host"], parts["port"] or ""
    if port_text and not 0 < int(port_text) < 65536:
        raise ValueError("api_url's port must be 1 to 65535")
    if "?" in text or "#" in text:
        raise ValueError("api_url may hold no query or fragment: put them in url_template")
    names = PLACEHOLDER_RE.findall(host)
    if not names:
        if not (_HOST_NAME_RE.fullmatch(host) or _IPV6_RE.fullmatch(host)):
            raise ValueError("api_url's host must be a host name or an IP address")
        api = ApiUrl(match["scheme"], host.lower(), "", port_text, path)
        _agrees_with_urllib3(api)
        return api
    return _per_tenant(match["scheme"], host, port_text, path, names)


def _per_tenant(scheme: str, host: str, port_text: str, path: str, names: list[str]) -> ApiUrl:
    if any(f"{{{name}}}" != TENANT_FIELD for name in names):
        raise ValueError("api_url's host may name only {tenant_id} (the per-tenant form)")
    first, _, suffix = host.partition(".")
    if first != TENANT_FIELD or "{" in suffix:
        raise ValueError(
            "api_url's {tenant_id} must be the whole first label of its host "
            "(https://{tenant_id}.vendor.example)"
        )
    if suffix.count(".") < 1 or not _HOST_NAME_RE.fullmatch(suffix) or suffix.endswith("."):
        raise ValueError(
            "api_url's host after {tenant_id}. must be a fixed name of at least two labels "
            "(a tenant id may never choose the registrable domain)"
        )
    if scheme != "https":
        raise ValueError(
            "the per-tenant api_url (https://{tenant_id}.suffix) is https only, whatever "
            "allow_plain_http says: the credential goes to many hosts"
        )
    api = ApiUrl(scheme, "", suffix.lower(), port_text, path)
    _agrees_with_urllib3(api)
    return api


def _agrees_with_urllib3(api: ApiUrl) -> None:
    """urllib3, which routes the request, must read api_url's authority as we do."""
    try:
        parsed = parse_url(api.base_for("t"))
    except LocationValueError as exc:
        raise ValueError("api_url cannot be parsed as a URL") from exc
    if _authority_of(parsed) != api.authority_for("t"):
        raise ValueError("api_url's host and port are not what an HTTP client reads in it")


def _authority_of(parsed: Any) -> Authority:
    scheme = (parsed.scheme or "").lower()
    return Authority(
        scheme, (parsed.host or "").lower(), parsed.port or DEFAULT_PORTS.get(scheme, 0)
    )


@dataclass(frozen=True, slots=True)
class Piece:
    """One piece of a template after `{api_url}`: literal text, or a field (its name) standing
    in the path or in a query value."""

    text: str
    field: str | None = None
    in_query: bool = False


def parse_url_template(template: str) -> tuple[Piece, ...]:
    """`template` checked (the module's rules) and cut into pieces; ValueError naming what is
    wrong."""
    _check_prefix(template)
    rest = template.removeprefix(API_URL_FIELD)
    tokens = re.split(r"({[^{}]*})", rest)
    unknown = unknown_fields(rest)
    if unknown:
        raise ValueError(f"url_template uses unknown fields {unknown}")
    pieces: list[Piece] = []
    in_query = False
    for index, token in enumerate(tokens):
        if index % 2:  # a field
            if token == API_URL_FIELD:
                raise ValueError("url_template may name {api_url} only at its start")
            pieces.append(Piece(token, token[1:-1], in_query))
            continue
        if "{" in token or "}" in token:
            raise ValueError("url_template has an unmatched brace: fields are {name}")
        if "#" in token:
            raise ValueError("url_template may not have a fragment (#): nothing after # is sent")
        if not _URL_TEXT_RE.fullmatch(token):
            raise ValueError(
                "url_template's literal text is not URL text (a space, a control, a bad %XX?)"
            )
        if not in_query and "?" in token:  # the query starts here: cut the literal in two
            head, _, tail = token.partition("?")
            pieces.append(Piece(head))
            token, in_query = f"?{tail}", True
        pieces.append(Piece(token, None, in_query))
    _check_path(pieces)
    _check_query(pieces)
    return tuple(pieces)


def _check_prefix(template: str) -> None:
    after = template.removeprefix(API_URL_FIELD)
    if after == template or after[:1] not in ("", "/", "?"):
        raise ValueError(
            "url_template must begin with {api_url} followed by /, ? or its end: the URL's "
            "scheme, host and port are api_url's, and a field fills only a path segment or a "
            "query value"
        )


def _check_path(pieces: list[Piece]) -> None:
    path = "".join("{}" if p.field else p.text for p in pieces if not p.in_query)
    for segment in path.split("/"):
        if "{}" not in segment and climbs(segment):
            raise ValueError("url_template's path has a dot segment (. or ..)")


def _check_query(pieces: list[Piece]) -> None:
    query = "".join("{}" if p.field else p.text for p in pieces if p.in_query)
    for item in query.removeprefix("?").split("&"):
        key, equals, _ = item.partition("=")
        if "{}" in key or ("{}" in item and not equals):
            raise ValueError(
                "url_template names a field in a query key: a field fills only a query value "
                "(?id={object_id})"
            )


def climbs(raw: str) -> bool:
    """True when `raw`, read as a lenient proxy or server might read a path, holds a `.` or
    `..` segment: percent-decoding repeated until nothing changes, `/` or `\\` separating
    segments, and a segment's `;params` dropped (`..;` is `..` to some servers)."""
    text = raw
    while True:
        for segment in _SEPARATORS_RE.split(text):
            if segment.partition(";")[0] in (".", ".."):
                return True
        decoded = unquote(text)
        if decoded == text:  # each decoding that changes the text shortens it: this ends
            return False
        text = decoded


def path_segment(value: str) -> str:
    """`value` percent-encoded as one path segment that cannot be read as another path.

    `quote` leaves `.` as it is, and a segment of only dots is a dot segment that urllib3 (and
    many servers) resolve away: `..` would climb to the parent. Such a segment has its dots
    encoded too (`%2E%2E`), which every layer keeps as one literal segment.
    """
    encoded = quote(value, safe="")
    return encoded.replace(".", "%2E") if encoded in (".", "..") else encoded


def query_value(value: str) -> str:
    """`value` percent-encoded as one query value: `&`, `=`, `#`, `+` and `/` included."""
    return quote(value, safe="")


class VendorUrl:
    """The URL of each job: `api_url` and `url_template` filled, its authority checked."""

    def __init__(self, api_url: str, template: str, *, refuse_dot_segments: bool) -> None:
        self.api = parse_api_url(api_url)
        self.pieces = parse_url_template(template)
        self.refuse_dot_segments = refuse_dot_segments
        #: The path's slashes as sent: base path and the template's literal path text.
        self.path_slashes = self.api.path.count("/") + sum(
            p.text.count("/") for p in self.pieces if p.field is None and not p.in_query
        )

    def filled(self, tenant_id: str, value_of: Callable[[str], Any]) -> str:
        """The URL for a job of `tenant_id` whose fields are `value_of(name)`; TemplateError
        when a field cannot fill it (a param missing, a dot segment, a bad host label). Its
        authority is not checked here (`url_for` does)."""
        sent: list[str] = [self.api.base_for(tenant_id)]
        segment: list[str] = []  # the current path segment's raw text, as a proxy would see it
        for piece in self.pieces:
            if piece.field is None:
                sent.append(piece.text)
                if not piece.in_query:
                    first, *others = piece.text.split("/")
                    segment.append(first)
                    for other in others:
                        self._check_segment(segment)
                        segment = [other]
                continue
            text = segment_text(value_of(piece.field))
            if piece.in_query:
                sent.append(query_value(text))
            else:
                sent.append(path_segment(text))
                segment.append(text)
        self._check_segment(segment)
        return "".join(sent)

    def _check_segment(self, raw: list[str]) -> None:
        if self.refuse_dot_segments and climbs("".join(raw)):
            raise TemplateError(
                "dot_segment", "a path field holds a . or .. segment (perhaps encoded)"
            )

    def url_for(self, tenant_id: str, value_of: Callable[[str], Any]) -> str | None:
        """The URL to send, or None when urllib3 cannot send it as filled (its path's segment
        count changed, it cannot be parsed). TemplateError: refused (`filled`'s codes, and
        `url_authority` when its scheme, host or port are not api_url's)."""
        try:
            url = self.filled(tenant_id, value_of)
            parsed = parse_url(url)
        except (UnicodeEncodeError, LocationValueError):  # a lone surrogate; unparsable
            return None
        if parsed.auth is not None or _authority_of(parsed) != self.api.authority_for(tenant_id):
            raise TemplateError(
                "url_authority", "the filled URL's scheme, host or port are not api_url's"
            )
        if (parsed.path or "").count("/") != self.path_slashes:
            return None
        return url
