"""The rate benchmark's CPU by process (sweeper_bench.process_cpu): each process of the run is
charged to its role, and nothing outside the run is."""

from __future__ import annotations

from sweeper_bench.process_cpu import HARNESS, ProcessCpu, by_role, roles

HARNESS_PID = 100


def _table(cpu: dict[int, float]) -> dict[int, ProcessCpu]:
    """A machine: the harness with its servers and environments, and someone else's process."""
    tree = {
        1: (0, "/sbin/init"),
        HARNESS_PID: (1, "python sweeper bench rate"),
        110: (HARNESS_PID, "python -m sweeper_local.lite_aws -H 127.0.0.1 -p 5000"),
        120: (HARNESS_PID, "python -m sweeper_local.moto_server -H 127.0.0.1 -p 5001"),
        130: (HARNESS_PID, "python -m sweeper_local.vendor --rate 10/1s"),
        140: (HARNESS_PID, "/usr/lib/postgresql/16/bin/postgres -D /data"),
        141: (140, "postgres: nobody sweeper 127.0.0.1(5555) idle"),
        150: (HARNESS_PID, "python -c from multiprocessing.forkserver import main"),
        151: (150, "python -c from multiprocessing.forkserver import main"),
        152: (150, "python -c from multiprocessing.forkserver import main"),
        200: (1, "/usr/lib/postgresql/16/bin/postgres -D /elsewhere"),
        201: (1, "python -m sweeper_local.lite_aws -p 6000"),
    }
    return {
        pid: ProcessCpu(pid, parent, command, cpu.get(pid, 0.0))
        for pid, (parent, command) in tree.items()
    }


def test_each_process_of_the_run_takes_the_role_of_its_nearest_known_ancestor() -> None:
    # Given a machine with the run's processes, and another user's PostgreSQL and stand-in
    table = _table({})
    # When the roles are read with the environments' pids known
    found = roles(table, HARNESS_PID, {151: "consumer", 152: "producer"})
    # Then each server is known by its command line, a backend by its postmaster, an
    # environment by its pid, the forkserver is the harness's, and nothing outside the run
    assert found == {
        HARNESS_PID: HARNESS,
        110: "stand_in",
        120: "moto",
        130: "vendor",
        140: "postgres",
        141: "postgres",
        150: HARNESS,
        151: "consumer",
        152: "producer",
    }


def test_cpu_between_two_snapshots_is_summed_by_role() -> None:
    # Given two snapshots: the stand-in used 2 s, a backend 0.5 s, a consumer started in
    # between 3 s, and another user's server 9 s
    before = _table({110: 1.0, 141: 0.5, 201: 1.0})
    after = _table({110: 3.0, 141: 1.0, 151: 3.0, 201: 10.0})
    del before[151]
    # When the CPU between them is charged
    used = by_role(before, after, HARNESS_PID, {151: "consumer"})
    # Then each role has what its processes used, and the other user's server is not counted
    assert used["stand_in"] == 2.0
    assert used["postgres"] == 0.5
    assert used["consumer"] == 3.0
    assert sum(used.values()) == 5.5
