"""The CPU caps of local environments: which cgroup files they write, and when none is made."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweeper_local.cpu_cap import PERIOD_US, CpuCaps, vcpu_for


def _v1(root: Path) -> Path:
    cpu = root / "cpu"
    cpu.mkdir()
    (cpu / "cpu.cfs_quota_us").write_text("-1")
    return cpu


def test_lambdas_share_is_one_vcpu_at_1769_mb() -> None:
    assert vcpu_for(1769) == 1.0
    assert vcpu_for(512) == pytest.approx(0.2894, abs=1e-4)


def test_a_v1_cap_sets_the_period_and_the_memorys_share_of_it(tmp_path: Path) -> None:
    _v1(tmp_path)
    cap = CpuCaps(tmp_path).cap(vcpu_for(512))
    assert cap is not None
    assert cap.version == 1
    assert (cap.path / "cpu.cfs_period_us").read_text() == str(PERIOD_US)
    assert (cap.path / "cpu.cfs_quota_us").read_text() == str(round(512 / 1769 * PERIOD_US))
    cap.add(4242)
    assert (cap.path / "cgroup.procs").read_text() == "4242"


def test_a_v2_cap_writes_cpu_max_and_the_least_quota_is_one_millisecond(tmp_path: Path) -> None:
    (tmp_path / "cgroup.subtree_control").write_text("cpu memory pids")
    cap = CpuCaps(tmp_path).cap(vcpu_for(128) / 10)  # 0.7 % of a core: below the kernel's least
    assert cap is not None
    assert cap.version == 2
    assert (cap.path / "cpu.max").read_text() == f"1000 {PERIOD_US}"


def test_throttling_is_read_from_cpu_stat(tmp_path: Path) -> None:
    _v1(tmp_path)
    cap = CpuCaps(tmp_path).cap(0.5)
    assert cap is not None
    assert cap.throttled() == (0, 0.0)  # nothing written yet
    (cap.path / "cpu.stat").write_text("nr_periods 50\nnr_throttled 7\nthrottled_time 2500000000\n")
    assert cap.throttled() == (7, 2.5)


def test_removing_a_cap_hands_its_processes_back_to_the_parent(tmp_path: Path) -> None:
    cpu = _v1(tmp_path)
    cap = CpuCaps(tmp_path).cap(0.5)
    assert cap is not None
    cap.add(4242)
    cap.remove()
    assert (cpu / "cgroup.procs").read_text() == "4242"


def test_without_a_cpu_controller_no_cap_is_made(tmp_path: Path) -> None:
    (tmp_path / "cgroup.subtree_control").write_text("memory pids")  # v2 without cpu
    caps = CpuCaps(tmp_path)
    assert caps.available is False
    assert caps.cap(0.5) is None
