"""nginx's `limit_req` as a vendor: a leaky bucket sweeper did not write, on a loopback port.

`NginxVendor` starts nginx with a configuration of its own (`.ci/ensure-nginx.sh` finds or
installs the binary, as `.ci/ensure-postgres.sh` does PostgreSQL): one zone counting every call
to `/v1/` at `rate` a second, with `burst` (0: none, each call spaced 1/rate after the last),
answering 429 past it, with `Retry-After: 1` when asked. Every other call is answered 204 from
the content phase: nginx's `return` would answer in the rewrite phase, before `limit_req`
counts the request. Its access log holds each arrival's time, status and path.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Self

import urllib3

from sweeper_local.errors import LocalStackError
from sweeper_local.postgres import free_port
from sweeper_local.service import Service

REPO_ROOT = Path(__file__).resolve().parents[2]
START_SECONDS = 10.0

CONFIG = """
worker_processes 1;
daemon off;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 256; }}
http {{
  log_format arrivals '$msec $status $uri';
  access_log {prefix}/access.log arrivals;
  client_body_temp_path {prefix}/tmp;
  proxy_temp_path {prefix}/tmp;
  fastcgi_temp_path {prefix}/tmp;
  uwsgi_temp_path {prefix}/tmp;
  scgi_temp_path {prefix}/tmp;
  limit_req_zone $server_name zone=vendor:1m rate={rate}r/s;
  limit_req_status 429;
  server {{
    listen 127.0.0.1:{port};
    server_name vendor;
    location /v1/ {{
      limit_req zone=vendor {burst};
      {retry_after}
      root {prefix}/html;
      try_files /none =204;
    }}
  }}
}}
"""


def nginx_binary() -> str:
    """The nginx binary: `SWEEPER_NGINX`, the one on the path, or one installed now."""
    found = subprocess.run(  # noqa: S603 - the repository's own script, no shell
        ["/bin/bash", str(REPO_ROOT / ".ci" / "ensure-nginx.sh")],
        check=False,
        capture_output=True,
        text=True,
    )
    if found.returncode != 0:
        raise LocalStackError(found.stderr.strip().splitlines()[-1] if found.stderr else "no nginx")
    return found.stdout.strip().splitlines()[-1]


class NginxVendor(Service):
    """nginx answering `/v1/` under `limit_req` (see the module docstring)."""

    def __init__(
        self,
        binary: str,
        prefix: Path,
        *,
        rate: int = 15,
        burst: int = 0,
        retry_after: bool = False,
    ) -> None:
        self.binary = binary
        self.port = free_port()
        self.prefix = prefix
        self.url = f"http://127.0.0.1:{self.port}"
        for folder in ("tmp", "html"):
            (prefix / folder).mkdir(parents=True, exist_ok=True)
        (prefix / "nginx.conf").write_text(
            CONFIG.format(
                prefix=prefix,
                port=self.port,
                rate=rate,
                burst=f"burst={burst} nodelay" if burst else "",
                # `always`: nginx adds a header to a 429 only when told to
                retry_after="add_header Retry-After 1 always;" if retry_after else "",
            ),
            encoding="utf-8",
        )
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Self:
        conf = self.prefix / "nginx.conf"
        self.proc = subprocess.Popen(  # noqa: S603 - fixed argv, no shell
            [self.binary, "-p", str(self.prefix), "-c", str(conf)], stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + START_SECONDS
        while True:
            try:
                urllib3.request("GET", f"{self.url}/", timeout=1, retries=False)
                return self
            except urllib3.exceptions.HTTPError as exc:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise LocalStackError(f"nginx did not start on port {self.port}") from exc
                time.sleep(0.05)

    def requests(self) -> list[tuple[float, str, str]]:
        """Each call's arrival time, status and path, in order (the start-up probe left out)."""
        lines = (self.prefix / "access.log").read_text(encoding="utf-8").splitlines()
        return [(float(at), status, uri) for at, status, uri in (x.split() for x in lines[1:])]

    def statuses(self) -> list[str]:
        return [status for _, status, _ in self.requests()]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
