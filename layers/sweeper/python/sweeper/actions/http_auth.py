"""The `http` kind's authentication: the policy's `auth` table, and what each mode sends.

Modes (`auth.type`):

| type   | secret (Secrets Manager)                                | sent                          |
|--------|---------------------------------------------------------|-------------------------------|
| none   | -                                                       | nothing                       |
| bearer | the token                                               | Authorization: Bearer <token> |
| header | the API key                                             | <auth.header>: <key>          |
| basic  | {"username": ..., "password": ...}                      | Authorization: Basic <base64> |
| oauth2 | the client secret, or {"client_id", "client_secret"}    | Authorization: Bearer <token> |

A `secret_arn` may name `{tenant_id}` in its name's last part: a secret per tenant, each mode's
credentials then kept per tenant (`sweeper.actions.tenant_credentials`).

Every secret is read through the Powertools cache, so a rotation reaches a warm environment
within its max age, and at once after an AUTH answer (`refresh`). An OAuth2 access token is
fetched with the client-credentials grant and cached per environment until shortly before it
expires; the batch's threads share it (one fetch at a time, under a lock), and a failing token
endpoint is classified into an outcome (`CredentialError`), never raised past the action.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Final, Literal, Protocol
from urllib.parse import urlencode

import urllib3
from pydantic import BaseModel, ConfigDict, Field, model_validator
from urllib3.exceptions import (
    ConnectTimeoutError,
    HTTPError,
    NameResolutionError,
    NewConnectionError,
    ReadTimeoutError,
)

from sweeper.actions.retry_after import parse_retry_after
from sweeper.actions.secret_template import (
    SecretTemplate,
    check_secret_arn,
    is_secret_template,
    parse_secret_template,
)
from sweeper.actions.token import SecretToken, TokenSource, checked
from sweeper.errors import TokenError
from sweeper.models import OutcomeClass

#: An access token is renewed this long before it expires (at most a tenth of its lifetime).
TOKEN_EXPIRY_MARGIN_SECONDS: Final = 60.0
#: The lifetime assumed when a token answer gives none (RFC 6749 makes `expires_in` optional).
DEFAULT_TOKEN_LIFETIME_SECONDS: Final = 300.0
#: After a failed token fetch, calls in this window get the same answer without a new fetch:
#: a batch's threads do not each wait on a token endpoint that is down.
TOKEN_FAILURE_HOLD_SECONDS: Final = 5.0
#: At most this much of a token endpoint's answer is read.
MAX_TOKEN_ANSWER_BYTES: Final = 64 * 1024
#: Header names: RFC 9110 tokens.
HEADER_NAME_PATTERN: Final = r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$"


class _AuthModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def secret_arns(self) -> tuple[str, ...]:
        """The secrets this mode reads (the consumer is granted GetSecretValue on these)."""
        secret = getattr(self, "secret_arn", None)
        return (secret,) if secret else ()

    @model_validator(mode="after")
    def _secret_template_checked(self) -> _AuthModel:
        for arn in self.secret_arns():
            check_secret_arn(arn)
        return self

    def secret_template(self) -> SecretTemplate | None:
        """The secret per tenant, when `secret_arn` names `{tenant_id}` (`secret_template`)."""
        templates = [arn for arn in self.secret_arns() if is_secret_template(arn)]
        return parse_secret_template(templates[0]) if templates else None


class NoAuth(_AuthModel):
    """Nothing is sent: a vendor reached over a private path, or one that needs no credential."""

    type: Literal["none"] = "none"


class BearerAuth(_AuthModel):
    """`Authorization: Bearer <token>`, the token the secret's SecretString."""

    type: Literal["bearer"] = "bearer"
    secret_arn: str = Field(min_length=1)


class HeaderAuth(_AuthModel):
    """An API key in a header of the vendor's naming (e.g. `X-Api-Key`)."""

    type: Literal["header"] = "header"
    header: str = Field(pattern=HEADER_NAME_PATTERN)
    secret_arn: str = Field(min_length=1)


class BasicAuth(_AuthModel):
    """HTTP Basic: the secret is `{"username": ..., "password": ...}`."""

    type: Literal["basic"] = "basic"
    secret_arn: str = Field(min_length=1)


class OAuth2Auth(_AuthModel):
    """OAuth2 client credentials (RFC 6749 section 4.4) at `token_url`.

    The secret holds the client secret, or a JSON object with `client_secret` and, unless the
    policy names it, `client_id`. `token_url` may start with `{api_url}`.
    """

    type: Literal["oauth2"] = "oauth2"
    token_url: str = Field(pattern=r"^(https?://|\{api_url\})")
    secret_arn: str = Field(min_length=1)
    client_id: str | None = Field(default=None, min_length=1)
    scope: str | None = None
    audience: str | None = None


HttpAuth = Annotated[
    NoAuth | BearerAuth | HeaderAuth | BasicAuth | OAuth2Auth, Field(discriminator="type")
]


class CredentialError(TokenError):
    """Credentials cannot be had; `outcome` is what the call counts as (nothing was sent to
    the API). Carries a short code, never a secret or a token."""

    def __init__(
        self,
        code: str,
        message: str,
        outcome: OutcomeClass = OutcomeClass.TRANSIENT,
        retry_after_seconds: float | None = None,
    ) -> None:
        super().__init__(code, message)
        self.outcome = outcome
        self.retry_after_seconds = retry_after_seconds


@dataclass(frozen=True, slots=True)
class Presented:
    """What a call sends to authenticate: its headers, and the credential they carry (what a
    refresh compares with, to know whether it changed)."""

    headers: Mapping[str, str] = field(default_factory=dict)
    credential: str | None = None


class Credentials(Protocol):
    def present(self, timeout_seconds: float | None) -> Presented:
        """The headers to send now; raises CredentialError when they cannot be had."""
        ...

    def refresh(self, sent: Presented, timeout_seconds: float | None) -> bool:
        """After an AUTH answer: renew past any cache; True when what would be sent changed.
        Raises CredentialError when renewing fails in a way that classifies the call."""
        ...


class NoCredentials:
    def present(self, timeout_seconds: float | None) -> Presented:
        return Presented()

    def refresh(self, sent: Presented, timeout_seconds: float | None) -> bool:
        return False


class SecretCredentials:
    """A header built from a secret's value (bearer, header, basic)."""

    def __init__(self, source: TokenSource, render: Callable[[str], Mapping[str, str]]) -> None:
        self._source = source
        self._render = render

    def present(self, timeout_seconds: float | None) -> Presented:
        token = self._source.current()
        return Presented(self._render(token), token) if token is not None else Presented()

    def refresh(self, sent: Presented, timeout_seconds: float | None) -> bool:
        try:
            return self._source.refresh(sent.credential)
        except TokenError:
            return False  # the AUTH answer stands: the circuit opens as usual


def bearer_header(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def basic_credentials(secret: str) -> str:
    """`username:password` of a basic secret, base64-encoded; TokenError when it is not one."""
    try:
        value = json.loads(secret)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise TokenError("basic_secret_invalid", "the basic secret is not a JSON object")
    username, password = value.get("username"), value.get("password")
    if not isinstance(username, str) or not isinstance(password, str) or ":" in username:
        raise TokenError(
            "basic_secret_invalid",
            "the basic secret needs string username (without ':') and password",
        )
    pair = f"{username}:{password}"
    if "\r" in pair or "\n" in pair:
        raise TokenError("basic_secret_invalid", "the basic secret holds a line break")
    return base64.b64encode(pair.encode()).decode("ascii")


@dataclass(frozen=True, slots=True)
class ClientCredentials:
    client_id: str
    client_secret: str


def client_credentials(secret: str, client_id: str | None) -> ClientCredentials:
    """The OAuth2 client of a secret (plain: the client secret; JSON: `client_secret` and maybe
    `client_id`), the policy's `client_id` first. TokenError when incomplete."""
    value: Any = secret
    if secret.lstrip().startswith("{"):
        try:
            value = json.loads(secret)
        except ValueError as exc:
            raise TokenError("oauth2_secret_invalid", "the OAuth2 secret is not JSON") from exc
    if isinstance(value, dict):
        client_id = client_id or value.get("client_id")
        value = value.get("client_secret")
    if not isinstance(value, str) or not value:
        raise TokenError("oauth2_secret_invalid", "the OAuth2 secret has no client_secret")
    if not isinstance(client_id, str) or not client_id:
        raise TokenError("oauth2_secret_invalid", "no client_id in the policy or the secret")
    return ClientCredentials(client_id, value)


def _expiry_margin(lifetime: float) -> float:
    return min(TOKEN_EXPIRY_MARGIN_SECONDS, lifetime / 10)


def _lifetime(answer: Mapping[str, Any]) -> float:
    expires_in = answer.get("expires_in", DEFAULT_TOKEN_LIFETIME_SECONDS)
    if isinstance(expires_in, str) and expires_in.isdigit():  # some servers send a string
        expires_in = int(expires_in)
    if isinstance(expires_in, bool) or not isinstance(expires_in, int | float) or expires_in <= 0:
        raise CredentialError("oauth2_bad_answer", "the token answer's expires_in is not positive")
    return float(expires_in)


class OAuth2Credentials:
    """An access token from the client-credentials grant, cached until shortly before expiry.

    One instance per environment (the runtime builds the action once per cold start), shared
    by the batch's threads: a lock makes one of them fetch while the others wait for its token.
    """

    def __init__(
        self,
        config: OAuth2Auth,
        token_url: str,
        secret: TokenSource,
        pool: Callable[[], urllib3.PoolManager],
        *,
        connect_timeout_seconds: float,
        read_timeout_seconds: float,
        user_agent: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._config = config
        self._token_url = token_url
        self._secret = secret
        self._pool = pool
        self._connect = connect_timeout_seconds
        self._read = read_timeout_seconds
        self._user_agent = user_agent
        self._clock = clock
        self._lock = threading.Lock()
        self._token: str | None = None
        self._renew_at = 0.0
        #: The token the last 401 made it fetch: refused too, it is AUTH (renewed once only).
        self._renewed: str | None = None
        self._failure: CredentialError | None = None
        self._failure_until = 0.0

    def present(self, timeout_seconds: float | None) -> Presented:
        with self._lock:
            if self._token is None or self._clock() >= self._renew_at:
                self._fetch(timeout_seconds)
            assert self._token is not None
            return Presented(bearer_header(self._token), self._token)

    def refresh(self, sent: Presented, timeout_seconds: float | None) -> bool:
        with self._lock:
            if sent.credential == self._renewed:
                return False  # already a renewed token: the refusal is not the token's age
            if self._token != sent.credential:
                return True  # another thread already renewed it
            self._token = None
            self._failure = None
            self._fetch(timeout_seconds)
            self._renewed = self._token
            return self._token != sent.credential

    def _fetch(self, timeout_seconds: float | None) -> None:
        """A new token into the cache (the lock held); CredentialError when there is none."""
        now = self._clock()
        if self._failure is not None and now < self._failure_until:
            raise self._failure
        try:
            self._token, lifetime = self._ask(timeout_seconds, reread_secret=False)
        except CredentialError as exc:
            self._token, self._failure = None, exc
            self._failure_until = self._clock() + TOKEN_FAILURE_HOLD_SECONDS
            raise
        self._failure = None
        self._renew_at = now + lifetime - _expiry_margin(lifetime)

    def _ask(self, timeout_seconds: float | None, *, reread_secret: bool) -> tuple[str, float]:
        """One token request; a refusal of the client makes it re-read the secret once (it may
        have been rotated within its cache age) and ask again if it changed."""
        try:
            raw = self._secret.current()
        except TokenError as exc:
            raise CredentialError(exc.code, str(exc)) from exc
        if raw is None:
            raise CredentialError("oauth2_secret_invalid", "the OAuth2 secret is empty")
        try:
            client = client_credentials(raw, self._config.client_id)
        except TokenError as exc:
            raise CredentialError(exc.code, str(exc), OutcomeClass.AUTH) from exc
        try:
            return self._request(client, timeout_seconds)
        except CredentialError as exc:
            if exc.outcome is not OutcomeClass.AUTH or reread_secret:
                raise
            try:
                changed = self._secret.refresh(raw)
            except TokenError:
                changed = False
            if not changed:
                raise
            return self._ask(timeout_seconds, reread_secret=True)

    def _request(
        self, client: ClientCredentials, timeout_seconds: float | None
    ) -> tuple[str, float]:
        form = {
            "grant_type": "client_credentials",
            "client_id": client.client_id,
            "client_secret": client.client_secret,
        }
        if self._config.scope:
            form["scope"] = self._config.scope
        if self._config.audience:
            form["audience"] = self._config.audience
        timeout = urllib3.Timeout(connect=self._connect, read=self._read, total=timeout_seconds)
        try:
            response = self._pool().urlopen(
                "POST",
                self._token_url,
                body=urlencode(form),
                headers={
                    "Content-Type": "application/x-www-form-urlencoded",
                    "Accept": "application/json",
                    "User-Agent": self._user_agent,
                },
                timeout=timeout,
                retries=False,
                redirect=False,
                preload_content=False,
            )
        except HTTPError as exc:
            raise _transport_failure(exc) from exc
        try:
            status = response.status
            retry_after = response.headers.get("Retry-After")
            body = response.read(MAX_TOKEN_ANSWER_BYTES + 1, decode_content=True)
        except HTTPError as exc:
            raise CredentialError("oauth2_timeout", "the token answer did not arrive") from exc
        finally:
            response.release_conn()
        return _token_of(status, retry_after, body)


def _transport_failure(exc: HTTPError) -> CredentialError:
    if isinstance(exc, NameResolutionError | NewConnectionError | ConnectTimeoutError):
        return CredentialError("oauth2_unreachable", "the token endpoint cannot be reached")
    if isinstance(exc, ReadTimeoutError):
        return CredentialError("oauth2_timeout", "the token endpoint did not answer in time")
    return CredentialError("oauth2_error", "the token request failed")


def _token_of(status: int, retry_after: str | None, body: bytes) -> tuple[str, float]:
    """The access token and its lifetime from a token endpoint's answer, else CredentialError:
    throttled (429, or 503 naming a wait), transient (5xx, an unreadable answer), auth (the
    client refused: 400/401/403, or any other status the endpoint should never give)."""
    if status == 429 or (status == 503 and retry_after is not None):
        raise CredentialError(
            "oauth2_throttled",
            "the token endpoint is throttling",
            OutcomeClass.THROTTLED,
            parse_retry_after(retry_after),
        )
    if status >= 500:
        raise CredentialError(f"oauth2_http_{status}", "the token endpoint failed")
    if status != 200:
        raise CredentialError(
            f"oauth2_http_{status}", "the token endpoint refused the client", OutcomeClass.AUTH
        )
    if len(body) > MAX_TOKEN_ANSWER_BYTES:
        raise CredentialError("oauth2_bad_answer", "the token answer is too large")
    try:
        answer = json.loads(body)
    except ValueError as exc:
        raise CredentialError("oauth2_bad_answer", "the token answer is not JSON") from exc
    if not isinstance(answer, dict) or not isinstance(answer.get("access_token"), str):
        raise CredentialError("oauth2_bad_answer", "the token answer has no access_token")
    token_type = answer.get("token_type", "Bearer")
    if not isinstance(token_type, str) or token_type.lower() != "bearer":
        raise CredentialError(
            "oauth2_token_type", "the token answer is not a Bearer token", OutcomeClass.AUTH
        )
    try:
        token = checked(answer["access_token"])
    except TokenError as exc:
        raise CredentialError("oauth2_bad_answer", "the access token is not one line") from exc
    return token, _lifetime(answer)


def credentials_for(
    auth: NoAuth | BearerAuth | HeaderAuth | BasicAuth | OAuth2Auth,
    *,
    api_url: str,
    secrets: Callable[..., SecretToken],
    pool: Callable[[], urllib3.PoolManager],
    connect_timeout_seconds: float,
    read_timeout_seconds: float,
    user_agent: str,
) -> Credentials:
    """The credentials of an auth mode; `secrets(arn, parse=...)` reads a secret."""
    match auth:
        case BearerAuth():
            return SecretCredentials(secrets(auth.secret_arn), bearer_header)
        case HeaderAuth():
            name = auth.header
            return SecretCredentials(secrets(auth.secret_arn), lambda key: {name: key})
        case BasicAuth():
            return SecretCredentials(
                secrets(auth.secret_arn, parse=basic_credentials),
                lambda pair: {"Authorization": f"Basic {pair}"},
            )
        case OAuth2Auth():
            return OAuth2Credentials(
                auth,
                auth.token_url.replace("{api_url}", api_url.rstrip("/")),
                secrets(auth.secret_arn, parse=str),
                pool,
                connect_timeout_seconds=connect_timeout_seconds,
                read_timeout_seconds=read_timeout_seconds,
                user_agent=user_agent,
            )
    return NoCredentials()
