"""A disposable PostgreSQL cluster for the local stack, the tests and the benchmarks.

initdb refuses to run as root, so when we are root the server runs as an unprivileged account
(`nobody` by default). Binaries come from `SWEEPER_PG_BIN`, the PATH, or the distribution's
versioned folders. Written by hand because no maintained library starts a system PostgreSQL
as another user without Docker; it is a few subprocess calls.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

import psycopg
from psycopg import sql

from sweeper_local.errors import LocalStackError
from sweeper_local.service import Service

START_TIMEOUT_SECONDS = 30.0
UNPRIVILEGED_USER = "nobody"
_DISTRO_GLOBS = (
    "/usr/lib/postgresql/*/bin",
    "/usr/pgsql-*/bin",
    "/opt/homebrew/opt/postgresql*/bin",
)


def find_pg_bin() -> Path:
    """The folder holding initdb and postgres, newest version first."""
    explicit = os.environ.get("SWEEPER_PG_BIN")
    candidates: list[Path] = [Path(explicit)] if explicit else []
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).resolve().parent)
    for pattern in _DISTRO_GLOBS:
        root = Path(pattern.split("*")[0]).parent
        if root.exists():
            found = sorted(Path("/").glob(pattern.lstrip("/")), key=_version_key, reverse=True)
            candidates.extend(found)
    for folder in candidates:
        if (folder / "initdb").exists() and (folder / "postgres").exists():
            return folder
    raise LocalStackError(
        "no PostgreSQL server binaries found (initdb, postgres): install PostgreSQL 15+ "
        "(e.g. the distribution's postgresql package), set SWEEPER_PG_BIN, or pass "
        "--database-url / DATABASE_URL"
    )


def _version_key(path: Path) -> tuple[int, ...]:
    digits = "".join(ch if ch.isdigit() else " " for ch in str(path)).split()
    return tuple(int(d) for d in digits)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class LocalPostgres(Service):
    """Start with `with LocalPostgres() as pg: pg.url`; the data folder is removed on exit."""

    durable: bool = False  # fsync off unless a benchmark asks for real durability
    port: int = 0
    _tmp: Path | None = field(default=None, init=False, repr=False)
    _proc: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    _argv: list[str] = field(default_factory=list, init=False, repr=False)
    _run_as: tuple[int, int] | None = field(default=None, init=False, repr=False)

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def url_for(self, dbname: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def start(self) -> Self:
        bin_dir = find_pg_bin()
        self._tmp = Path(tempfile.mkdtemp(prefix="sweeper-pg-"))
        data = self._tmp / "data"
        run_as = _unprivileged_ids()
        if run_as is not None:
            os.chown(self._tmp, *run_as)
        self._tmp.chmod(0o700)
        self.port = self.port or free_port()
        self._run(
            [
                str(bin_dir / "initdb"),
                "-D",
                str(data),
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ],
            run_as,
        )
        settings = [
            "-c",
            "listen_addresses=127.0.0.1",
            "-c",
            f"port={self.port}",
            "-c",
            f"unix_socket_directories={self._tmp}",
            "-c",
            "max_connections=200",
            "-c",
            "shared_buffers=256MB",
        ]
        if not self.durable:
            settings += [
                "-c",
                "fsync=off",
                "-c",
                "synchronous_commit=off",
                "-c",
                "full_page_writes=off",
            ]
        self._argv = [str(bin_dir / "postgres"), "-D", str(data), *settings]
        self._run_as = run_as
        self._launch()
        return self

    def _launch(self) -> None:
        assert self._tmp is not None
        log = self._tmp / "server.log"
        with log.open("ab") as out:
            if self._run_as is not None:
                os.chown(log, *self._run_as)
            self._proc = subprocess.Popen(  # noqa: S603 - fixed argv, no shell
                self._argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                user=self._run_as[0] if self._run_as else None,
                group=self._run_as[1] if self._run_as else None,
            )
        self._wait_ready(log)

    def restart(self, *, immediate: bool = True) -> None:
        """Stop the server and start it again on the same data and port.

        `immediate` is a crash-like stop (SIGQUIT: sessions are cut, recovery runs at start);
        otherwise a fast shutdown (SIGINT: sessions end with 57P01 admin_shutdown). Clients
        see their connections broken, then refused until the server accepts again.
        """
        if self._proc is None or self._tmp is None:
            raise LocalStackError("the local PostgreSQL is not running")
        self._proc.send_signal(signal.SIGQUIT if immediate else signal.SIGINT)
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._launch()

    @contextmanager
    def refusing(self) -> Iterator[None]:
        """Stop the server (a fast shutdown) for the block, then start it again on the same
        data and port: meanwhile every connection attempt is refused."""
        if self._proc is None or self._tmp is None:
            raise LocalStackError("the local PostgreSQL is not running")
        self._proc.send_signal(signal.SIGINT)
        self._proc.wait(timeout=30)
        try:
            yield
        finally:
            self._launch()

    def _run(self, argv: list[str], run_as: tuple[int, int] | None) -> None:
        done = subprocess.run(  # noqa: S603 - fixed argv, no shell
            argv,
            capture_output=True,
            check=False,
            user=run_as[0] if run_as else None,
            group=run_as[1] if run_as else None,
        )
        if done.returncode != 0:
            self.stop()
            raise LocalStackError(
                f"{Path(argv[0]).name} failed ({done.returncode}): "
                f"{done.stderr.decode(errors='replace')[-2000:]}"
            )

    def _wait_ready(self, log: Path) -> None:
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                text = log.read_text(errors="replace")[-2000:]
                self.stop()
                raise LocalStackError(f"postgres exited at start: {text}")
            try:
                with psycopg.connect(self.url, connect_timeout=1):
                    return
            except psycopg.OperationalError:
                time.sleep(0.05)
        self.stop()
        raise LocalStackError(f"postgres did not accept connections in {START_TIMEOUT_SECONDS}s")

    def create_database(self, name: str, template: str | None = None) -> str:
        """Create a database (optionally from a template) and return its URL."""
        ident = sql.Identifier(name)
        with psycopg.connect(self.url, autocommit=True) as conn:
            if template is None:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(ident))
            else:
                conn.execute(
                    sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                        ident, sql.Identifier(template)
                    )
                )
        return self.url_for(name)

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()  # SIGTERM: smart shutdown is fine, sessions are ours
            try:
                self._proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None


def _unprivileged_ids() -> tuple[int, int] | None:
    """(uid, gid) to run the server as when we are root; None when we are not."""
    if os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam(os.environ.get("SWEEPER_PG_USER", UNPRIVILEGED_USER))
    except KeyError as exc:
        raise LocalStackError(
            "running as root needs an unprivileged account for PostgreSQL "
            "(set SWEEPER_PG_USER to one)"
        ) from exc
    return entry.pw_uid, entry.pw_gid
