"""`sweeper console` in a real headless browser (Debian's chromium through chromedriver) against
the local stack: the page loads and shows what the ledger holds, an action from the page moves a
job and is recorded with the operator, and the server refuses what does not come from its page.

Never skipped: without chromium and chromedriver (`.ci/ensure-chromium.sh`) it fails.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.select import Select
from selenium.webdriver.support.wait import WebDriverWait

from sweeper.ledger.store import Ledger
from sweeper.limiter import DynamoLimiter
from sweeper.models import JobStatus, NewJob, OutcomeClass
from sweeper.redrive.letters import queue_depth
from sweeper.scheduling import schedule_jobs
from sweeper_cli.webconsole.backend import ApiBackend, ledger_backend
from sweeper_cli.webconsole.guard import TOKEN_HEADER
from sweeper_cli.webconsole.launch import launch_file
from sweeper_cli.webconsole.server import ConsoleServer
from sweeper_local.background import LocalConsoleStack
from sweeper_local.operator_api import OperatorApiStandIn
from sweeper_local.poller import run_until
from sweeper_local.scenarios import SCENARIO_CONFIG
from sweeper_tools.endpoints import resolve, write_local_file
from sweeper_tools.operator_client import OperatorApiClient
from sweeper_tools.policy_file import load_config
from tests.conftest import PgServer, _db_counter

pytestmark = pytest.mark.integration

OPERATOR = "console-tester"
POLICY = "exports"
#: The job the action test holds from the page; the refusal tests aim at UNTOUCHED_KEY.
HELD_KEY = "exports:t2:later0:v1"
UNTOUCHED_KEY = "exports:t2:later1:v1"
#: Where the README's screenshot goes when asked: SWEEPER_CONSOLE_SCREENSHOT=docs/console.png
SCREENSHOT_ENV = "SWEEPER_CONSOLE_SCREENSHOT"
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,1000",
)


def _binary(env: str, name: str) -> str:
    found = os.environ.get(env) or shutil.which(name)
    assert found, f"{name} is missing: run `make install` (.ci/ensure-chromium.sh)"
    return found


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[webdriver.Chrome]:
    """Debian's chromium through its chromedriver: nothing downloaded, a fresh profile."""
    options = webdriver.ChromeOptions()
    options.binary_location = _binary("SWEEPER_CHROMIUM", "chromium")
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    service = Service(executable_path=_binary("SWEEPER_CHROMEDRIVER", "chromedriver"))
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_page_load_timeout(20)
    yield driver
    driver.quit()


@dataclass
class Console:
    server: ConsoleServer
    ledger: Ledger
    db_url: str
    queue_url: str
    dlq_url: str
    sqs: Any
    endpoints: Any
    local_file: Path


@pytest.fixture(scope="module")
def console(
    pg_server: PgServer, pg_template: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Console]:
    """One local stack for the module (starting one takes seconds): after one run settled six
    jobs, two failed by hand, four due tomorrow, one dead letter; the console page's server
    over it, acting as OPERATOR. Only the action test changes a job (HELD_KEY); the refusals
    aim at another."""
    name = f"sweeper_t{os.getpid()}_{next(_db_counter)}"
    db_url = pg_server.create_database(name, template=pg_template)
    folder = tmp_path_factory.mktemp("console-page")
    config_path = folder / "sweeper.toml"
    config_path.write_text(SCENARIO_CONFIG, encoding="utf-8")
    config = load_config(config_path)
    stack = LocalConsoleStack(config, config_path=str(config_path), database_url=db_url).start()
    local_file = folder / "local.json"
    write_local_file(stack.local_file(), local_file)
    ledger = Ledger(db_url)
    try:
        yield from _prepared(stack, config, ledger, db_url, local_file)
    finally:
        ledger.close()
        stack.stop()
        pg_server.drop_database(name)


def _prepared(
    stack: LocalConsoleStack, config: Any, ledger: Ledger, db_url: str, local_file: Path
) -> Iterator[Console]:
    policy = config.policy(POLICY)
    now = datetime.now(UTC)
    schedule_jobs(ledger, policy, [NewJob("t1", f"done{i}", now) for i in range(6)], now)
    stack.fire(POLICY, now)
    assert run_until(lambda: ledger.counts(POLICY)[JobStatus.SUCCEEDED] == 6, timeout_seconds=30), (
        ledger.counts(POLICY)
    )
    tomorrow = now + timedelta(days=1)
    schedule_jobs(ledger, policy, [NewJob("t2", f"later{i}", tomorrow) for i in range(4)], now)
    schedule_jobs(ledger, policy, [NewJob("t3", f"bad{i}", tomorrow) for i in range(2)], now)
    for i in range(2):
        ledger.mark_failed(
            f"exports:t3:bad{i}:v1", OutcomeClass.PERMANENT, "http_400", now, count_attempt=True
        )
    endpoints = resolve(
        local_file=str(local_file), database_url=None, region=None, profile=None, stack=None
    )
    backend = ledger_backend(endpoints, config, ledger, OPERATOR)
    assert backend.target == "local stack"
    sqs = endpoints.sqs()
    where = endpoints.policy(POLICY)
    assert where.queue_url
    assert where.dlq_url
    sqs.send_message(QueueUrl=where.dlq_url, MessageBody='{"dead": "letter"}')  # DLQ depth 1
    server = ConsoleServer(backend)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Console(
            server, ledger, db_url, where.queue_url, where.dlq_url, sqs, endpoints, local_file
        )
    finally:
        server.shutdown()
        server.server_close()


def _text(driver: webdriver.Chrome, css: str) -> str:
    return str(driver.find_element(By.CSS_SELECTOR, css).text)


def _wait(driver: webdriver.Chrome) -> WebDriverWait[webdriver.Chrome]:
    # Generous for a loaded machine; a passing run waits milliseconds.
    return WebDriverWait(driver, 30, poll_frequency=0.05)


def _sign_in(driver: webdriver.Chrome, server: ConsoleServer) -> None:
    """Open the URL the console prints; its one-time code (once traded, the cookie) leads on
    to the console's page."""
    driver.get(server.url)
    _wait(driver).until(expected_conditions.url_to_be(server.home))
    _wait(driver).until(expected_conditions.presence_of_element_located((By.TAG_NAME, "main")))


#: The principal the operator API stand-in names for the local emulator's signing key.
API_CALLER = "arn:aws:iam::000000000000:user/testing"


def _ledger_activity(db_url: str) -> tuple[int, int]:
    """Claims (published by the policy's runs) and completions in the chart's window."""
    since = datetime.now(UTC) - timedelta(hours=6)
    with psycopg.connect(db_url) as conn:
        claimed = conn.execute(
            "SELECT coalesce(sum(published), 0) FROM sweeper_runs "
            "WHERE policy = %s AND started_at >= %s",
            (POLICY, since),
        ).fetchone()
        completed = conn.execute(
            "SELECT count(*) FROM sweeper_jobs WHERE policy = %s AND completed_at >= %s "
            "AND status IN ('succeeded', 'failed')",
            (POLICY, since),
        ).fetchone()
    assert claimed is not None
    assert completed is not None
    return int(claimed[0]), int(completed[0])


def test_the_page_loads_and_its_numbers_match_the_ledger(
    browser: webdriver.Chrome, console: Console
) -> None:
    # Given the local stack after a run, and the console's URL with its login code
    # When the browser opens it
    _sign_in(browser, console.server)
    # Then the code is traded for the session cookie and dropped from the address bar
    assert "code=" not in browser.current_url
    section = f"#policy-{POLICY}"
    _wait(browser).until(
        expected_conditions.presence_of_element_located((By.CSS_SELECTOR, section))
    )
    # And each count by state is the ledger's, held and cancelled included
    for status, n in console.ledger.counts(POLICY).items():
        assert _text(browser, f'{section} [data-status="{status.value}"]') == str(n), status
    # And the chart's totals and bars are the ledger's claims and completions
    claimed, completed = _ledger_activity(console.db_url)
    assert (claimed, completed) == (6, 8)
    assert _text(browser, f"{section} .total-claimed") == str(claimed)
    assert _text(browser, f"{section} .total-completed") == str(completed)
    bars = browser.find_elements(By.CSS_SELECTOR, f"{section} g.bucket")
    assert len(bars) == 24
    assert sum(int(b.get_attribute("data-claimed") or 0) for b in bars) == claimed
    # And the DLQ depth is the queue's, the gate is shown, the run reconciles
    assert queue_depth(console.sqs, console.dlq_url)[0] == 1
    assert _text(browser, f"#dlq-{POLICY}") == "1"
    assert "open" in _text(browser, f"{section} tr.gate")
    assert "reconciles" in _text(browser, f"{section} tr.run")
    assert _text(browser, f"{section} .oldest") == "none eligible"


def test_an_action_from_the_page_changes_the_ledger_and_records_the_operator(
    browser: webdriver.Chrome, console: Console, tmp_path: Path
) -> None:
    # Given the console open in the browser, and a pending job due tomorrow
    _sign_in(browser, console.server)
    # When the operator searches its tenant, opens the job, and holds it with a reason
    browser.find_element(By.ID, "search-q").send_keys("t2")
    browser.find_element(By.ID, "search-go").click()
    _wait(browser).until(
        expected_conditions.presence_of_element_located((By.CSS_SELECTOR, "tr.hit"))
    )
    assert len(browser.find_elements(By.CSS_SELECTOR, "tr.hit")) == 4
    browser.find_element(By.LINK_TEXT, HELD_KEY).click()
    _wait(browser).until(expected_conditions.presence_of_element_located((By.ID, "act")))
    assert _text(browser, "#job-status") == "pending"
    # (the button is enabled once the page's script has attached to it)
    _wait(browser).until(expected_conditions.element_to_be_clickable((By.ID, "act-preview")))
    Select(browser.find_element(By.ID, "act-action")).select_by_value("hold")
    browser.find_element(By.ID, "act-reason").send_keys("legal hold 42")
    browser.find_element(By.ID, "act-preview").click()
    # Then it is asked to confirm what will move, and nothing has moved yet
    question = _wait(browser).until(
        expected_conditions.visibility_of_element_located((By.ID, "act-question"))
    )
    assert question.text == f"hold 1 job(s) (1 pending) of policy {POLICY}, as {OPERATOR}?"
    job = console.ledger.get(HELD_KEY)
    assert job is not None
    assert job.status is JobStatus.PENDING
    # When it confirms
    browser.find_element(By.ID, "act-yes").click()
    _wait(browser).until(
        expected_conditions.text_to_be_present_in_element((By.ID, "act-result"), "moved 1")
    )
    # Then the ledger holds the job, and the action is recorded with the operator and reason
    job = console.ledger.get(HELD_KEY)
    assert job is not None
    assert job.status is JobStatus.HELD
    assert job.hold_reason == "legal hold 42"
    with psycopg.connect(console.db_url) as conn:
        actions = conn.execute(
            "SELECT action, actor, reason FROM sweeper_operator_actions WHERE action = 'hold'"
        ).fetchall()
    assert actions == [("hold", OPERATOR, "legal hold 42")]
    # And the reloaded page shows the job held, its event by the operator
    _wait(browser).until(
        expected_conditions.text_to_be_present_in_element((By.ID, "job-status"), "held")
    )
    _wait(browser).until(
        expected_conditions.text_to_be_present_in_element(
            (By.CSS_SELECTOR, "tr.event .actor"), OPERATOR
        )
    )
    assert _text(browser, "tr.event .reason") == "legal hold 42"
    # And the overview counts it held (the README's picture: SCREENSHOT_ENV names where)
    browser.get(f"http://127.0.0.1:{console.server.port}/")
    assert _text(browser, f'#policy-{POLICY} [data-status="held"]') == "1"
    assert _text(browser, f"#policy-{POLICY} tr.action .actor") == OPERATOR
    assert _text(browser, f"#policy-{POLICY} tr.action .reason") == "legal hold 42"
    assert browser.save_screenshot(os.environ.get(SCREENSHOT_ENV) or str(tmp_path / "page.png"))


def test_a_closed_gate_shows_until_when_and_why(
    browser: webdriver.Chrome, console: Console
) -> None:
    # Given the policy's scope closed for ten minutes after a 429
    table = console.endpoints.limiter_table()
    limiter = DynamoLimiter(console.endpoints.dynamodb(), table)
    until = datetime.now(UTC) + timedelta(minutes=10)
    limiter.close(POLICY, until.timestamp(), "throttled")
    reopens = datetime.fromtimestamp(limiter.state(POLICY).closed_until or 0, UTC)
    # When the page is opened
    _sign_in(browser, console.server)
    # Then the gate reads closed, until the limiter's reopening time, and why
    gate = _text(browser, f'#policy-{POLICY} tr.gate[data-scope="{POLICY}"] td.closed')
    assert gate == f"closed until {reopens.isoformat()} (throttled)"


def _request(
    console: Console,
    method: str,
    path: str,
    headers: dict[str, str],
    body: dict[str, Any] | None = None,
) -> tuple[int, str, dict[str, str]]:
    return _request_to(console.server, path, method, headers, body)


def _request_to(
    server: ConsoleServer,
    path: str,
    method: str = "GET",
    headers: dict[str, str] | None = None,
    body: dict[str, Any] | None = None,
) -> tuple[int, str, dict[str, str]]:
    headers = headers or {"Host": f"127.0.0.1:{server.port}"}
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    data = None if body is None else json.dumps(body).encode()
    conn.request(method, path, body=data, headers={"Connection": "close", **headers})
    answer = conn.getresponse()
    text = answer.read().decode()
    found = {k.lower(): v for k, v in answer.getheaders()}
    conn.close()
    return answer.status, text, found


def _hold_request(console: Console) -> dict[str, Any]:
    return {
        "policy": POLICY,
        "action": "hold",
        "key": UNTOUCHED_KEY,
        "reason": "drive-by",
        "dry_run": False,
    }


def _own_headers(console: Console) -> dict[str, str]:
    """What the page's own script sends: the session cookie, the header token, its origin."""
    own = f"127.0.0.1:{console.server.port}"
    guard = console.server.guard
    return {
        "Host": own,
        "Origin": f"http://{own}",
        "Cookie": guard.set_cookie().split(";")[0],
        TOKEN_HEADER: guard.csrf,
        "Content-Type": "application/json",
    }


def _untouched(console: Console) -> None:
    """The refused request's job is as it was, and no action carries its reason."""
    job = console.ledger.get(UNTOUCHED_KEY)
    assert job is not None
    assert job.status is JobStatus.PENDING
    with psycopg.connect(console.db_url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM sweeper_operator_actions WHERE reason = 'drive-by'"
        ).fetchone()
    assert row == (0,)


def test_a_request_without_the_session_or_the_header_token_is_refused(console: Console) -> None:
    own = f"127.0.0.1:{console.server.port}"
    guard = console.server.guard
    # A page without the session cookie, or with the header token in its place
    status, text, _ = _request(console, "GET", "/", {"Host": own})
    assert status == 403
    assert "session" in text
    wrong_cookie = f"{guard.cookie_name}={guard.csrf}"
    status, _, _ = _request(console, "GET", "/", {"Host": own, "Cookie": wrong_cookie})
    assert status == 403
    # A login with a wrong code, or with the cookie's value as the code
    for code in ("wrong", guard.session, guard.csrf):
        status, _, _ = _request(console, "GET", f"/login?code={code}", {"Host": own})
        assert status == 403
    # An action without the header token (with the page's cookie, as a forged form would send),
    # with the cookie's value in the header, or with the header and no cookie
    for change in ({TOKEN_HEADER: ""}, {TOKEN_HEADER: guard.session}, {"Cookie": ""}):
        headers = {**_own_headers(console), **change}
        status, _, _ = _request(console, "POST", "/api/action", headers, _hold_request(console))
        assert status == 403, change
    _untouched(console)


def test_a_wrong_host_header_is_refused(console: Console) -> None:
    # A name rebound to 127.0.0.1 (DNS rebinding) carries its own Host header
    status, text, _ = _request(
        console,
        "GET",
        f"/login?code={console.server.guard.login.code}",
        {"Host": "rebound.example"},
    )
    assert status == 403
    assert "Host" in text
    headers = {**_own_headers(console), "Host": f"rebound.example:{console.server.port}"}
    status, _, _ = _request(console, "POST", "/api/action", headers, _hold_request(console))
    assert status == 403
    _untouched(console)


def test_a_cross_origin_post_is_refused(console: Console) -> None:
    # Even with the cookie and the header token, a POST from another origin moves nothing
    headers = {**_own_headers(console), "Origin": "http://evil.example"}
    status, text, answer = _request(console, "POST", "/api/action", headers, _hold_request(console))
    assert status == 403
    assert "cross-origin" in text
    assert not any(name.startswith("access-control-") for name in answer)
    # A preflight gets no CORS headers either
    status, _, answer = _request(
        console,
        "OPTIONS",
        "/api/action",
        {"Host": f"127.0.0.1:{console.server.port}", "Origin": "http://evil.example"},
    )
    assert status == 403
    assert not any(name.startswith("access-control-") for name in answer)
    _untouched(console)
    # While the same request from the page's own origin is accepted (a dry run changes nothing)
    status, text, _ = _request(
        console,
        "POST",
        "/api/action",
        _own_headers(console),
        {**_hold_request(console), "dry_run": True},
    )
    assert status == 200
    assert json.loads(text)["moved"] == 1


def test_the_page_over_the_operator_api_shows_the_ledgers_numbers(
    browser: webdriver.Chrome, console: Console
) -> None:
    # Given the same local stack, and the page served over its operator API (`--stack`):
    # signed requests to a stand-in of the two function URLs, no ledger connection of its own
    stand_in = OperatorApiStandIn(console.local_file).start()
    client = OperatorApiClient.from_outputs(console.endpoints.session, stand_in.urls)
    server = ConsoleServer(ApiBackend(client, [POLICY], operator=API_CALLER))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        # When the browser opens it
        _sign_in(browser, server)
        section = f"#policy-{POLICY}"
        _wait(browser).until(
            expected_conditions.presence_of_element_located((By.CSS_SELECTOR, section))
        )
        # Then it says it reads the operator API as the caller's principal
        assert "operator API" in _text(browser, ".who")
        assert _text(browser, "#operator") == API_CALLER
        # And each count by state, the chart's totals, the DLQ and the run are the ledger's
        for status, n in console.ledger.counts(POLICY).items():
            assert _text(browser, f'{section} [data-status="{status.value}"]') == str(n), status
        claimed, completed = _ledger_activity(console.db_url)
        assert _text(browser, f"{section} .total-claimed") == str(claimed)
        assert _text(browser, f"{section} .total-completed") == str(completed)
        assert _text(browser, f"#dlq-{POLICY}") == str(queue_depth(console.sqs, console.dlq_url)[0])
        limiter = DynamoLimiter(console.endpoints.dynamodb(), console.endpoints.limiter_table())
        closed = limiter.state(POLICY).closed(time.time())  # an earlier test may close it
        assert ("closed until" in _text(browser, f"{section} tr.gate")) is closed
        assert "reconciles" in _text(browser, f"{section} tr.run")
    finally:
        server.shutdown()
        server.server_close()
        stand_in.stop()


def test_the_file_open_hands_the_browser_signs_it_in_with_three_secrets_apart(
    browser: webdriver.Chrome, console: Console
) -> None:
    # Given a console just started (its code unused), and the file `--open` hands the browser
    server = ConsoleServer(console.server.backend)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with launch_file(server.url) as page:
            # When the browser opens that file (its command line would name the file only)
            browser.get(page.as_uri())
            # Then it is led on to the console's page, signed in
            _wait(browser).until(expected_conditions.url_to_be(server.home))
            _wait(browser).until(
                expected_conditions.presence_of_element_located((By.ID, f"policy-{POLICY}"))
            )
        # And its cookie, the page's header token and the login code are three values
        cookie = browser.get_cookie(server.guard.cookie_name)
        assert cookie is not None
        assert cookie["httpOnly"]
        assert cookie["sameSite"] == "Strict"
        meta = browser.find_element(By.CSS_SELECTOR, 'meta[name="sweeper-token"]')
        header_token = meta.get_attribute("content")
        values = {cookie["value"], header_token, server.guard.login.code}
        assert len(values) == 3
        assert (cookie["value"], header_token) == (server.guard.session, server.guard.csrf)
        # And the code has served: opened again without the cookie, it is refused
        status, text, _ = _request_to(server, f"/login?code={server.guard.login.code}")
        assert status == 403
        assert "used or has expired" in text
    finally:
        server.shutdown()
        server.server_close()
