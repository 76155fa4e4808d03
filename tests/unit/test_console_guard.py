"""The console server's guard: the token, the Host header, the origin of a change."""

from __future__ import annotations

from http import HTTPStatus

import pytest

from sweeper_cli.webconsole.guard import TOKEN_HEADER, Guard

GUARD = Guard("s3cret-token", 8765)
HOST = {"Host": "127.0.0.1:8765"}
SAME_ORIGIN_POST = {
    **HOST,
    TOKEN_HEADER: "s3cret-token",
    "Origin": "http://127.0.0.1:8765",
    "Content-Type": "application/json",
}


def test_a_page_opens_with_the_token_in_the_url() -> None:
    assert GUARD.read_refusal(HOST, "s3cret-token") is None


def test_a_page_opens_with_the_cookie_the_first_visit_set() -> None:
    cookie = GUARD.set_cookie().split(";")[0]
    assert GUARD.read_refusal({**HOST, "Cookie": f"other=1; {cookie}"}, None) is None


@pytest.mark.parametrize("token", [None, "", "s3cret-tokex", "s3cret-token "])
def test_a_page_without_the_right_token_is_refused(token: str | None) -> None:
    refused = GUARD.read_refusal(HOST, token)
    assert refused is not None
    assert refused.status is HTTPStatus.FORBIDDEN


def test_a_cookie_of_another_console_port_does_not_open_this_one() -> None:
    other = Guard("s3cret-token-2", 9999).set_cookie().split(";")[0]
    assert GUARD.read_refusal({**HOST, "Cookie": other}, None) is not None


@pytest.mark.parametrize(
    "host",
    ["evil.example:8765", "127.0.0.1", "127.0.0.1:8766", "localhost.evil.example:8765", ""],
)
def test_a_host_other_than_this_loopback_server_is_refused_even_with_the_token(
    host: str,
) -> None:
    refused = GUARD.read_refusal({"Host": host}, "s3cret-token")
    assert refused is not None
    assert refused.reason == "unexpected Host header"


def test_localhost_with_the_port_is_this_server() -> None:
    assert GUARD.read_refusal({"Host": "localhost:8765"}, "s3cret-token") is None


def test_a_same_origin_post_with_the_token_header_is_a_change() -> None:
    assert GUARD.change_refusal(SAME_ORIGIN_POST) is None


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({TOKEN_HEADER: ""}, "no valid token"),
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


def test_the_cookie_is_http_only_and_same_site_strict() -> None:
    cookie = GUARD.set_cookie()
    assert "HttpOnly" in cookie
    assert "SameSite=Strict" in cookie
