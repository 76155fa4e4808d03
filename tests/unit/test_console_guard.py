"""The console server's guard: three secrets apart (the session cookie, the header a change
carries, the one-time login code of the printed URL), the Host header, the origin of a change."""

from __future__ import annotations

from http import HTTPStatus

import pytest

from sweeper_cli.webconsole.guard import LOGIN_CODE_SECONDS, TOKEN_HEADER, Guard, LoginCode

SESSION = "s3ssion-cookie-value"
CSRF = "csrf-header-value"
GUARD = Guard(SESSION, CSRF, 8765, LoginCode("one-time-code", expires_at=1e12))
HOST = {"Host": "127.0.0.1:8765"}
COOKIE = {"Cookie": f"{GUARD.cookie_name}={SESSION}"}
SAME_ORIGIN_POST = {
    **HOST,
    **COOKIE,
    TOKEN_HEADER: CSRF,
    "Origin": "http://127.0.0.1:8765",
    "Content-Type": "application/json",
}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_fresh_guard_has_three_different_random_secrets() -> None:
    guard = Guard.fresh(8765)
    secrets = {guard.session, guard.csrf, guard.login.code}
    assert len(secrets) == 3
    assert all(len(s) >= 43 for s in secrets)  # 256 bits, URL-safe
    assert Guard.fresh(8765).session != guard.session


def test_the_cookie_carries_the_session_and_never_the_header_token() -> None:
    cookie = GUARD.set_cookie()
    assert cookie.startswith(f"{GUARD.cookie_name}={SESSION};")
    assert CSRF not in cookie
    assert "HttpOnly" in cookie
    assert "SameSite=Strict" in cookie


def test_a_page_opens_with_the_session_cookie() -> None:
    assert GUARD.read_refusal({**HOST, "Cookie": f"other=1; {COOKIE['Cookie']}"}) is None


@pytest.mark.parametrize(
    "cookie", ["", f"sweeper_console_8765={CSRF}", "sweeper_console_8765=one-time-code"]
)
def test_a_page_without_the_session_cookie_is_refused(cookie: str) -> None:
    # (the header token and the login code are no session)
    refused = GUARD.read_refusal({**HOST, "Cookie": cookie})
    assert refused is not None
    assert refused.status is HTTPStatus.FORBIDDEN


def test_a_cookie_of_another_console_port_does_not_open_this_one() -> None:
    other = Guard(SESSION, CSRF, 9999, GUARD.login).set_cookie().split(";")[0]
    assert GUARD.read_refusal({**HOST, "Cookie": other}) is not None


@pytest.mark.parametrize(
    "host",
    ["evil.example:8765", "127.0.0.1", "127.0.0.1:8766", "localhost.evil.example:8765", ""],
)
def test_a_host_other_than_this_loopback_server_is_refused_even_with_the_cookie(
    host: str,
) -> None:
    refused = GUARD.read_refusal({"Host": host, **COOKIE})
    assert refused is not None
    assert refused.reason == "unexpected Host header"


def test_localhost_with_the_port_is_this_server() -> None:
    assert GUARD.read_refusal({"Host": "localhost:8765", **COOKIE}) is None


def test_a_same_origin_post_with_the_cookie_and_the_header_token_is_a_change() -> None:
    assert GUARD.change_refusal(SAME_ORIGIN_POST) is None


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({TOKEN_HEADER: ""}, "no valid token"),
        ({TOKEN_HEADER: SESSION}, "no valid token"),  # the cookie's value is not the header's
        ({"Cookie": ""}, "no session"),
        ({"Cookie": f"{GUARD.cookie_name}={CSRF}"}, "no session"),
        ({"Origin": "http://evil.example"}, "cross-origin"),
        ({"Origin": ""}, "cross-origin"),
        ({"Origin": "null"}, "cross-origin"),
        ({"Sec-Fetch-Site": "cross-site"}, "cross-site"),
        ({"Content-Type": "text/plain"}, "application/json"),
        ({"Host": "evil.example:8765", "Origin": "http://evil.example:8765"}, "Host"),
    ],
)
def test_a_change_without_every_mark_of_this_page_is_refused(
    change: dict[str, str], reason: str
) -> None:
    refused = GUARD.change_refusal({**SAME_ORIGIN_POST, **change})
    assert refused is not None
    assert reason in refused.reason


def test_the_login_code_is_redeemed_once() -> None:
    clock = Clock()
    code = LoginCode("one-time-code", expires_at=clock.now + 60, clock=clock)
    assert not code.redeem("one-time-codf")
    assert not code.redeem(None)
    assert code.redeem("one-time-code")
    # a second use of the same code, even at once, is refused
    assert not code.redeem("one-time-code")


def test_the_login_code_expires() -> None:
    clock = Clock()
    code = LoginCode.fresh(clock=clock)
    clock.now += LOGIN_CODE_SECONDS
    assert not code.redeem(code.code)
