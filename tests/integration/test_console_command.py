"""`sweeper console` as an operator runs it: a process on loopback that prints its URL, serves
the page to that URL (token and all) and nothing to a URL without it, and stops on Ctrl-C."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from sweeper.ledger.store import Ledger
from sweeper.models import NewJob
from sweeper_cli import main
from sweeper_cli.webconsole.server import ConsoleServer

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def test_console_serves_the_ledger_at_the_url_it_prints_and_stops_on_ctrl_c(
    ledger: Ledger, db_url: str, tmp_path: Path
) -> None:
    # Given a ledger with a pending job of the sample policy file's policy
    from sweeper.config import load_config

    policy = load_config(REPO / "sweeper.toml").policies[0]
    ledger.schedule(policy.name, 1, lambda j: policy.name, [NewJob("t1", "o1", _now())], _now())
    # When the operator starts `sweeper console --database-url` (no local stack)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sweeper_cli",
            "console",
            "--database-url",
            db_url,
            "--config",
            str(REPO / "sweeper.toml"),
            "--local-file",
            str(tmp_path / "none.json"),
            "--actor",
            "ana",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "AWS_REGION": "eu-west-1"},
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        # Then it prints a loopback URL with a token, which serves the page
        assert first.startswith("sweeper console at http://127.0.0.1:"), first
        url = first.split(" at ", 1)[1].strip()
        assert "?token=" in url
        browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
        with browser.open(url, timeout=10) as answer:  # the token traded for a cookie
            page = answer.read().decode()
        assert 'data-status="pending">1<' in page
        assert 'acting as <b id="operator">ana</b>' in page
        assert "reading the ledger" in page
        # And the same address without the token is refused
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(url.split("?")[0], timeout=10)
        assert refused.value.code == 403
    finally:
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=20)
    # And Ctrl-C stops it cleanly, with nothing on stderr (no token, no request log)
    assert process.returncode == 0, err
    assert err == ""
    assert "stopped" in out


def _now() -> datetime:
    return datetime.now(UTC)


class _FailingBackend:
    """A backend whose every read fails with a message holding a customer value."""

    operator = "ana"
    target = "ledger"

    def policies(self) -> list[str]:
        raise RuntimeError("tenant acme-secret-42")


def test_an_unexpected_failure_is_one_line_without_its_message(
    capfd: pytest.CaptureFixture[str],
) -> None:
    # Given a console whose backend fails with customer data in its message
    server = ConsoleServer(_FailingBackend())  # type: ignore[arg-type]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
        # When the page is opened
        with pytest.raises(urllib.error.HTTPError) as failed:
            browser.open(server.url, timeout=10)
        body = failed.value.read().decode()
    finally:
        server.shutdown()
        server.server_close()
    # Then the answer and the terminal name the error's type only, no traceback, no value
    assert failed.value.code == 500
    assert "RuntimeError" in body
    assert "acme" not in body
    err = capfd.readouterr().err
    assert err == "sweeper console: a request failed (RuntimeError)\n"


def test_a_port_in_use_is_one_line_naming_the_fix(db_url: str, tmp_path: Path) -> None:
    # Given the port taken by another listener
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        # When the console is asked to listen there
        result = CliRunner().invoke(
            main,
            [
                "console",
                "--database-url",
                db_url,
                "--config",
                str(REPO / "sweeper.toml"),
                "--local-file",
                str(tmp_path / "none.json"),
                "--port",
                str(port),
            ],
        )
    # Then it says so in one line, and which option to change
    assert result.exit_code == 1
    assert result.output.startswith(f"Error: cannot listen on 127.0.0.1:{port}")
    assert result.output.strip().endswith("choose another --port")
    assert len(result.output.strip().splitlines()) == 1
