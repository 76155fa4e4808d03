"""`sweeper console` as an operator runs it: a process on loopback that prints its URL, whose
one-time code signs one browser in, serves the page to that browser and to nothing else, opens
the browser without a secret on its command line, and stops on Ctrl-C."""

from __future__ import annotations

import json
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
from sweeper_local.poller import run_until

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def test_console_serves_the_ledger_at_the_url_it_prints_and_stops_on_ctrl_c(
    ledger: Ledger, db_url: str, tmp_path: Path
) -> None:
    # Given a ledger with a pending job of the sample policy file's policy
    from sweeper_tools.policy_file import load_config

    policy = load_config(REPO / "sweeper.toml").policies[0]
    ledger.schedule(policy.name, 1, lambda j: policy.name, [NewJob("t1", "o1", _now())], _now())
    # When the operator starts `sweeper console --database-url` (no local stack)
    process = _start_console(db_url, tmp_path)
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        # Then it prints a loopback URL with a login code, which signs a browser in
        assert first.startswith("sweeper console at http://127.0.0.1:"), first
        url = first.split(" at ", 1)[1].strip()
        home = url.split("login?", 1)[0]
        assert url.startswith(f"{home}login?code=")
        browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
        with browser.open(url, timeout=10) as answer:  # the code traded for the cookie
            assert 'content="0;url=/"' in answer.read().decode()
        # And that browser is served the page
        with browser.open(home, timeout=10) as answer:
            page = answer.read().decode()
        assert 'data-status="pending">1<' in page
        assert 'acting as <b id="operator">ana</b>' in page
        assert "reading the ledger" in page
        # And another is not: the code served once, the page needs the cookie
        for other in (url, home):
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(other, timeout=10)
            assert refused.value.code == 403
    finally:
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=20)
    # And Ctrl-C stops it cleanly, with nothing on stderr (no code, no request log)
    assert process.returncode == 0, err
    assert err == ""
    assert "stopped" in out


def _start_console(
    db_url: str, tmp_path: Path, *options: str, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    return subprocess.Popen(
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
            *options,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "AWS_REGION": "eu-west-1", **(env or {})},
    )


#: A stand-in for the operator's browser (webbrowser runs $BROWSER with the address): it
#: records its command line and the file it was given, as another local user could see them.
RECORDING_BROWSER = """
import json, os, sys
from pathlib import Path
from urllib.parse import unquote, urlsplit
record = {"argv": sys.argv[1:]}
if sys.argv[1].startswith("file:"):
    path = Path(unquote(urlsplit(sys.argv[1]).path))
    record["path"] = str(path)
    record["mode"] = os.stat(path).st_mode & 0o777
    record["folder_mode"] = os.stat(path.parent).st_mode & 0o777
    record["page"] = path.read_text(encoding="utf-8")
Path(os.environ["BROWSER_RECORD"]).write_text(json.dumps(record), encoding="utf-8")
"""


def test_open_hands_the_browser_a_private_file_never_the_code(db_url: str, tmp_path: Path) -> None:
    # Given a browser that records what it is started with
    script = tmp_path / "browser.py"
    script.write_text(RECORDING_BROWSER, encoding="utf-8")
    browser_command = tmp_path / "recording-browser"
    browser_command.write_text(f'#!/bin/sh\nexec {sys.executable} {script} "$@"\n')
    browser_command.chmod(0o755)
    record_file = tmp_path / "record.json"
    env = {"BROWSER": str(browser_command), "BROWSER_RECORD": str(record_file)}
    # When the operator starts `sweeper console --open`
    process = _start_console(db_url, tmp_path, "--open", env=env)
    try:
        assert process.stdout is not None
        url = process.stdout.readline().split(" at ", 1)[1].strip()
        code = url.split("?code=", 1)[1]
        assert run_until(record_file.exists, timeout_seconds=20)
        record = json.loads(record_file.read_text(encoding="utf-8"))
        # Then the browser's command line names a file, and no secret
        assert code not in " ".join(record["argv"])
        assert record["argv"] == [Path(record["path"]).as_uri()]
        # And that file is the operator's alone, and leads to the printed URL
        assert (record["mode"], record["folder_mode"]) == (0o600, 0o700)
        assert f'content="0;url={url}"' in record["page"]
        # And following it signs the browser in
        browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
        browser.open(url, timeout=10).close()
        with browser.open(url.split("login?", 1)[0], timeout=10) as answer:
            assert 'acting as <b id="operator">ana</b>' in answer.read().decode()
    finally:
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=20)
    # And the file is gone with the console
    assert process.returncode == 0, err
    assert not Path(record["path"]).exists()


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
        browser.open(server.url, timeout=10).close()  # signed in
        # When the page is opened
        with pytest.raises(urllib.error.HTTPError) as failed:
            browser.open(server.home, timeout=10)
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
