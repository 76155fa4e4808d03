"""CPU spent starting local execution environments: spawned interpreters against forks of the
preloaded forkserver (sweeper_local.preload), one run.

Each round starts `environments` consumer environments at once (the handler of
functions/consumer/app.py, as the event source starts them) and waits until each has loaded it.
CPU is user + system seconds from /proc: of every environment's process up to then, of the
forkserver over the round (the first forkserver round includes its start and preload), and of
this process. Rounds: `spawn`, then `forkserver` twice (a cold server, then a warm one).

`python -m sweeper_bench.cold_starts [--environments 10] [--json]` prints the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
from pathlib import Path
from typing import Any

from sweeper_local.lambda_runtime import START_METHOD_VARIABLE, ExecutionEnvironment

_TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of a live process (its threads included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def _forkservers() -> list[int]:
    """This process's forkserver (a child running multiprocessing.forkserver's main)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if parent == os.getpid() and b"multiprocessing.forkserver" in command:
            found.append(int(entry.name))
    return found


def _own_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_round(method: str, environments: int) -> dict[str, Any]:
    os.environ[START_METHOD_VARIABLE] = method
    server_before = sum(_cpu_seconds(pid) for pid in _forkservers())
    own_before = _own_cpu_seconds()
    started = time.monotonic()
    envs = [ExecutionEnvironment("consumer", {}) for _ in range(environments)]
    try:
        for env in envs:
            env.start()  # every cold start at once, as the event source does
        for env in envs:
            env.initialise()
        wall = time.monotonic() - started
        per_env = [_cpu_seconds(env.pid) for env in envs if env.pid is not None]
        server = sum(_cpu_seconds(pid) for pid in _forkservers()) - server_before
        own = _own_cpu_seconds() - own_before
        methods = sorted({str(env.start_method) for env in envs})
    finally:
        for env in envs:
            env.close()
    total = sum(per_env) + server + own
    return {
        "method": "+".join(methods),
        "environments": environments,
        "environments_cpu_seconds": round(sum(per_env), 2),
        "per_environment_cpu_seconds": round(sum(per_env) / len(per_env), 3),
        "forkserver_cpu_seconds": round(server, 2),
        "starting_process_cpu_seconds": round(own, 2),
        "total_cpu_seconds": round(total, 2),
        "wall_seconds": round(wall, 2),
    }


def run_cold_start_bench(environments: int) -> list[dict[str, Any]]:
    saved = os.environ.get(START_METHOD_VARIABLE)
    try:
        return [
            run_round("spawn", environments),
            run_round("forkserver", environments),
            run_round("forkserver", environments),
        ]
    finally:
        os.environ.pop(START_METHOD_VARIABLE, None)
        if saved is not None:
            os.environ[START_METHOD_VARIABLE] = saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--environments", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rounds = run_cold_start_bench(args.environments)
    if args.json:
        print(json.dumps(rounds))
        return
    for r in rounds:
        print(
            f"{r['method']:>10}: {r['environments']} environments, "
            f"{r['total_cpu_seconds']} CPU s in all ({r['per_environment_cpu_seconds']} s each "
            f"+ forkserver {r['forkserver_cpu_seconds']} s + starter "
            f"{r['starting_process_cpu_seconds']} s), {r['wall_seconds']} s wall"
        )


if __name__ == "__main__":
    main()
