"""The limiter against a bucket sweeper did not write: nginx's `limit_req`.

nginx is started on a loopback port with a configuration of its own (its setup installs nginx
when the machine has none, as `.ci/ensure-postgres.sh` does PostgreSQL). Four consumers, each
with its own limiter client, take slots of the policy's quota from DynamoDB (moto), wait for
them, and call nginx, which counts every arrival in its bucket; its access log says which it
let through.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import urllib3

from sweeper.config import LATE_SLOT_TOLERANCE_SECONDS, Policy, Quota
from sweeper.limiter import DynamoLimiter, Grant
from sweeper_local.aws import LocalAws, provision
from sweeper_local.postgres import free_port

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]
CALLS = 40
CONSUMERS = 4

CONFIG = """
worker_processes 1;
daemon off;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 256; }}
http {{
  log_format arrivals '$msec $status';
  access_log {prefix}/access.log arrivals;
  client_body_temp_path {prefix}/tmp;
  proxy_temp_path {prefix}/tmp;
  fastcgi_temp_path {prefix}/tmp;
  uwsgi_temp_path {prefix}/tmp;
  scgi_temp_path {prefix}/tmp;
  limit_req_zone $server_name zone=vendor:1m rate=15r/s;
  limit_req_status 429;
  server {{
    listen 127.0.0.1:{port};
    server_name vendor;
    location /v1/ {{
      limit_req zone=vendor {burst};
      root {prefix}/html;
      # `return` would answer in the rewrite phase, before limit_req counts the request
      try_files /none =204;
    }}
  }}
}}
"""


class Nginx:
    def __init__(self, binary: str, prefix: Path, burst: int) -> None:
        self.port = free_port()
        self.prefix = prefix
        for folder in ("tmp", "html"):
            (prefix / folder).mkdir(parents=True, exist_ok=True)
        burst_text = f"burst={burst} nodelay" if burst else ""
        (prefix / "nginx.conf").write_text(
            CONFIG.format(prefix=prefix, port=self.port, burst=burst_text), encoding="utf-8"
        )
        self.proc = subprocess.Popen(
            [binary, "-p", str(prefix), "-c", str(prefix / "nginx.conf")],
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 10
        while True:
            try:
                urllib3.request("GET", f"http://127.0.0.1:{self.port}/", timeout=1, retries=False)
                break
            except urllib3.exceptions.HTTPError:
                assert self.proc.poll() is None, self.proc.stderr.read() if self.proc.stderr else ""
                assert time.monotonic() < deadline, "nginx did not start"
                time.sleep(0.05)

    def statuses(self) -> list[str]:
        lines = (self.prefix / "access.log").read_text(encoding="utf-8").splitlines()
        return [line.split()[1] for line in lines[1:]]  # the first is the start-up probe

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


@pytest.fixture(scope="module")
def nginx_binary() -> str:
    found = subprocess.run(
        ["bash", str(REPO_ROOT / ".ci" / "ensure-nginx.sh")],
        check=True,
        capture_output=True,
        text=True,
    )
    return found.stdout.strip().splitlines()[-1]


@pytest.fixture
def table(local_aws: LocalAws, unique_name: str) -> str:
    return provision(
        local_aws.sqs(), local_aws.dynamodb(), Policy(name="p"), prefix=unique_name
    ).limiter_table


@pytest.fixture
def nginx(nginx_binary: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Nginx]:
    server = Nginx(nginx_binary, tmp_path / "nginx", burst=request.param)
    try:
        yield server
    finally:
        server.stop()


def _call_at_slots(local_aws: LocalAws, table: str, quota: Quota, url: str) -> int:
    """CALLS calls by CONSUMERS consumers at the quota's slots; returns how many were sent."""
    sent = [0]
    lock = threading.Lock()
    barrier = threading.Barrier(CONSUMERS)

    def consumer() -> None:
        limiter = DynamoLimiter(local_aws.dynamodb(), table)
        http = urllib3.PoolManager(retries=False, timeout=5)
        barrier.wait()
        while True:
            with lock:
                if sent[0] >= CALLS:
                    return
            decision = limiter.reserve("nginx", quota.interval_seconds, horizon=2.0)
            if not isinstance(decision, Grant):
                time.sleep(max(0.0, decision.retry_at - time.time()))
                continue
            time.sleep(max(0.0, decision.slot_at - time.time()))
            if time.time() - decision.slot_at > LATE_SLOT_TOLERANCE_SECONDS:
                continue  # woken too late: let the slot go, as a consumer does
            with lock:
                if sent[0] >= CALLS:
                    return
                sent[0] += 1
            http.request("DELETE", url)

    threads = [threading.Thread(target=consumer) for _ in range(CONSUMERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sent[0]


@pytest.mark.parametrize(
    ("nginx", "rate"),
    [(0, "15/1s bucket"), (5, "15/1s bucket:6")],
    indirect=["nginx"],
    ids=["no-burst", "burst-5"],
)
def test_told_nginxs_bucket_the_limiter_draws_no_429_from_it(
    local_aws: LocalAws, table: str, nginx: Nginx, rate: str
) -> None:
    # Given nginx's limit_req at 15/s (without burst, and with burst=5), and a policy told so
    quota = Quota.parse(rate)
    # When four consumers call it 40 times at the slots of the shared limiter
    sent = _call_at_slots(local_aws, table, quota, f"http://127.0.0.1:{nginx.port}/v1/objects/x")
    # Then nginx let every call through: none arrived earlier than its bucket allows
    statuses = nginx.statuses()
    assert sent == CALLS
    assert len(statuses) == CALLS
    assert statuses.count("429") == 0, statuses
