"""Where a local run's CPU goes, process by process: the consumers, and what AWS would not share.

On AWS the consumer environments have their cores to themselves; locally the AWS stand-in,
moto, PostgreSQL, the vendor simulator, the producer and the harness that plays Lambda's event
source mapping run on the same cores. `snapshot()` reads every process's CPU time from /proc
(Linux only); `by_role()` charges the CPU used between two snapshots to a role: each process
descending from the harness takes the role of its nearest ancestor (itself included) that has
one, a server by its command line, an execution environment by its pid, the rest `harness`.

What a process's reaped children used is in its own figures (`cutime`, `cstime`), so a
PostgreSQL backend that ends within the span is still charged to PostgreSQL; a process
that ends within the span and is reaped by a process of another role is charged to that one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

#: A server's role, by a word of its command line (`python -m MODULE`, or the binary's name).
ROLES_BY_COMMAND: tuple[tuple[str, str], ...] = (
    ("sweeper_local.lite_aws", "stand_in"),
    ("sweeper_local.moto_server", "moto"),
    ("sweeper_local.vendor", "vendor"),
    ("postgres", "postgres"),
)
HARNESS = "harness"


@dataclass(frozen=True, slots=True)
class ProcessCpu:
    """One process as /proc shows it: its parent, command line and CPU time so far (seconds,
    its reaped children's included)."""

    pid: int
    ppid: int
    command: str
    cpu_seconds: float


def _read(pid: int, ticks: int) -> ProcessCpu | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            text = stat.read()
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            command = cmdline.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:  # ended since it was listed
        return None
    head, _, rest = text.rpartition(")")
    fields = rest.split()
    # fields[0] is the state (field 3); utime, stime, cutime, cstime are fields 14 to 17.
    used = sum(int(f) for f in fields[11:15]) / ticks
    return ProcessCpu(pid, int(fields[1]), command or head.partition("(")[2], used)


def snapshot() -> dict[int, ProcessCpu]:
    """Every process's CPU time now; empty off Linux."""
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return {}
    ticks = os.sysconf("SC_CLK_TCK")
    found = (_read(pid, ticks) for pid in pids)
    return {p.pid: p for p in found if p is not None}


def _role_of_command(command: str) -> str | None:
    words = command.split()
    for word, role in ROLES_BY_COMMAND:
        if word in words or (words and os.path.basename(words[0]) == word):
            return role
    return None


def roles(
    processes: Mapping[int, ProcessCpu], harness: int, known: Mapping[int, str]
) -> dict[int, str]:
    """The role of each process descending from `harness` (itself included): that of its
    nearest ancestor in `known` (pid -> role) or with a server's command line, else HARNESS."""
    found = {pid: _role(processes, pid, harness, known) for pid in processes}
    return {pid: role for pid, role in found.items() if role is not None}


def _role(
    processes: Mapping[int, ProcessCpu], pid: int, harness: int, known: Mapping[int, str]
) -> str | None:
    """The role of `pid`, or None when it does not descend from `harness` (one walk up, which
    keeps the nearest role it passes and ends at the harness, or outside the run, or in a
    cycle)."""
    at, role, seen = pid, None, set()
    while at in processes and at not in seen:
        if at == harness:
            return role or known.get(harness, HARNESS)
        seen.add(at)
        role = role or known.get(at) or _role_of_command(processes[at].command)
        at = processes[at].ppid
    return None


def by_role(
    before: Mapping[int, ProcessCpu],
    after: Mapping[int, ProcessCpu],
    harness: int,
    known: Mapping[int, str],
) -> dict[str, float]:
    """CPU seconds each role used between the two snapshots (a process started in between
    counts from 0)."""
    totals: dict[str, float] = {}
    for snap, sign in ((after, 1.0), (before, -1.0)):
        for pid, role in roles(snap, harness, known).items():
            totals[role] = totals.get(role, 0.0) + sign * snap[pid].cpu_seconds
    return {role: max(0.0, seconds) for role, seconds in sorted(totals.items())}
