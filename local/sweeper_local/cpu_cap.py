"""A local execution environment's CPU, capped at the share Lambda gives its memory.

Lambda gives a function one vCPU at 1,769 MB and a proportional share below, enforced in
short periods: observed from outside, an environment that uses its share of a 20 ms period is
paused until the period ends. Local environments are processes on the machine's cores, so
without a cap they are kinder than Lambda: a 512 MB consumer may use a whole core here and
0.29 of one there. This puts an environment's process in a cgroup whose CPU bandwidth is that
share of every PERIOD_US: the kernel's own throttle (CFS bandwidth control), as on Lambda's
hosts.

Where no cgroup can be made (no cgroup filesystem, or not writable by this user) `CpuCaps`
says so (`available` is False) and environments run uncapped; the local runs that report
figures (the rate benchmark) state which it was.

Hand-written because it is three files of the cgroup filesystem per environment; a library
for it would add a dependency for less than it does here.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

from sweeper_tools.planning.cpu import vcpu_for

__all__ = ["PERIOD_US", "CpuCap", "CpuCaps", "vcpu_for"]

#: The period the share is enforced over (observed on Lambda: 20 ms).
PERIOD_US = 20_000
#: Where the cgroup filesystems are mounted.
CGROUP_ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True, slots=True)
class CpuCap:
    """One environment's cgroup: its process is held to `vcpu` of a core."""

    path: Path
    vcpu: float
    version: int  # 1: the v1 `cpu` controller; 2: the unified hierarchy

    def add(self, pid: int) -> None:
        """Move the process (every thread of it) into the cgroup."""
        (self.path / "cgroup.procs").write_text(str(pid))

    def throttled(self) -> tuple[int, float]:
        """Periods in which the cap paused the process, and for how long in all (seconds)."""
        stats: dict[str, int] = {}
        with contextlib.suppress(OSError):
            for line in (self.path / "cpu.stat").read_text().splitlines():
                name, _, value = line.partition(" ")
                with contextlib.suppress(ValueError):
                    stats[name] = int(value)
        if self.version == 1:
            return stats.get("nr_throttled", 0), stats.get("throttled_time", 0) / 1e9
        return stats.get("nr_throttled", 0), stats.get("throttled_usec", 0) / 1e6

    def remove(self) -> None:
        """Remove the cgroup (its process has ended, or is moved back to the parent's)."""
        with contextlib.suppress(OSError):
            for pid in (self.path / "cgroup.procs").read_text().split():
                (self.path.parent / "cgroup.procs").write_text(pid)
        with contextlib.suppress(OSError):
            self.path.rmdir()


class CpuCaps:
    """Makes a `CpuCap` per environment under one parent cgroup of this process."""

    def __init__(self, root: Path = CGROUP_ROOT) -> None:
        self._parent, self._version = _writable_parent(root)

    @property
    def available(self) -> bool:
        return self._parent is not None

    def cap(self, vcpu: float) -> CpuCap | None:
        """A new cgroup holding a process to `vcpu` of a core; None where caps are unavailable."""
        if self._parent is None:
            return None
        path = self._parent / f"sweeper-env-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        quota = max(1000, round(vcpu * PERIOD_US))  # the kernel's least quota is 1 ms
        try:
            path.mkdir()
            if self._version == 1:
                (path / "cpu.cfs_period_us").write_text(str(PERIOD_US))
                (path / "cpu.cfs_quota_us").write_text(str(quota))
            else:
                (path / "cpu.max").write_text(f"{quota} {PERIOD_US}")
        except OSError:
            with contextlib.suppress(OSError):
                path.rmdir()
            return None
        return CpuCap(path, vcpu, self._version)


def _writable_parent(root: Path) -> tuple[Path | None, int]:
    """A cgroup under which this user may make children with a CPU limit, and its version."""
    v1 = root / "cpu"
    if (v1 / "cpu.cfs_quota_us").exists() and os.access(v1, os.W_OK):
        return v1, 1
    for unified in (root, root / "unified"):
        controllers = unified / "cgroup.subtree_control"
        if controllers.exists() and os.access(unified, os.W_OK):
            with contextlib.suppress(OSError):
                if "cpu" in controllers.read_text().split():
                    return unified, 2
    return None, 0
