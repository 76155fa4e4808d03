"""A policy's consumer sizing it does not set is what `sweeper plan` derives from its limits and
the vendor latency it states; what it sets is its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from click.testing import CliRunner

from sweeper.config import Policy
from sweeper_cli import main
from sweeper_tools.planning.consumer_defaults import deployed_policy, derived_consumer
from sweeper_tools.planning.plan import PlanInput, make_plan

#: 50 calls a second (47.15/s at the default headroom) over 4 environments, a vendor at 130 ms
#: (p95 160 ms).
CONTRACT: dict[str, Any] = {
    "name": "exports",
    "quota": {"limit": 50, "period_seconds": 1},
    "action": {
        "api_url": "https://api.example.com",
        "latency_p50_seconds": 0.13,
        "latency_p95_seconds": 0.16,
    },
}


def _policy(**consumer: int) -> Policy:
    return Policy.model_validate({**CONTRACT, "consumer": consumer})


def test_a_policy_stating_its_vendor_gets_the_consumer_its_plan_derives() -> None:
    # Given the vendor's contract and nothing of the consumer's sizing
    consumer = derived_consumer(_policy())
    # Then each environment makes the calls 47.15/s needs in flight at the p95 service time
    # (47.15 x 0.19 s = 9 calls over 4 environments: 3 each), in batches of whole rounds that
    # need no window (9), and the timeout covers a batch: the longer of twice its 2.3 s and
    # the ledger read + one call's 2 + 10 s, + the 5 s the consumer leaves unused
    assert consumer.parallel_calls == 3
    assert (consumer.batch_size, consumer.batch_window_seconds) == (9, 0)
    assert consumer.timeout_seconds == 18
    # which is what the plan recommends for the policy so sized, and it reaches its rate
    plan = make_plan(
        _policy(parallel_calls=3, batch_size=9),
        PlanInput(latency_p50_seconds=0.13, latency_p95_seconds=0.16),
    )
    assert plan.recommended_parallel_calls == 3
    assert plan.recommended_timeout_seconds == 18
    assert plan.utilization_of_quota == 1.0


def test_what_a_policy_sets_is_kept_and_the_rest_derived_around_it() -> None:
    # Every field set: the policy's own consumer, unchanged
    own = _policy(
        parallel_calls=2, batch_size=4, batch_window_seconds=3, timeout_seconds=40, memory_mb=512
    )
    assert derived_consumer(own) == own.consumer
    # A batch smaller than the calls the rate needs caps them
    assert derived_consumer(_policy(batch_size=2)).parallel_calls == 2
    # Parallel calls set: the batch is whole rounds of them
    assert derived_consumer(_policy(parallel_calls=4)).batch_size == 8
    # A timeout set is kept whatever the batch needs
    assert derived_consumer(_policy(timeout_seconds=90)).timeout_seconds == 90


def test_the_memory_is_the_least_whose_cpu_share_carries_the_rate() -> None:
    # 47.15 jobs/s at 10 ms of CPU each over 4 environments, each at most 0.7 busy: 0.168 vCPU
    # an environment, 298 MB at 1,769 MB a vCPU, in 64 MB steps
    assert derived_consumer(_policy()).memory_mb == 320
    # Four times the rate needs four times the CPU (188.6/s: 0.674 vCPU, 1,192 MB)
    fast = Policy.model_validate({**CONTRACT, "quota": {"limit": 200, "period_seconds": 1}})
    assert derived_consumer(fast).memory_mb == 1216
    # A slow vendor's few jobs need little CPU: never below twice the measured resident memory
    slow = Policy.model_validate({**CONTRACT, "quota": {"limit": 5, "period_seconds": 1}})
    assert derived_consumer(slow).memory_mb == 256
    # Memory a policy sets is its own
    assert derived_consumer(_policy(memory_mb=2048)).memory_mb == 2048


def test_a_policy_stating_no_latency_keeps_the_defaults() -> None:
    policy = Policy.model_validate({**CONTRACT, "action": {"api_url": "https://a.example"}})
    assert derived_consumer(policy) == policy.consumer


def test_the_deployed_policy_carries_its_derived_consumer_in_what_a_function_reads() -> None:
    deployed = deployed_policy(_policy())
    # The function's environment holds only what was set: the derived sizing is set
    shipped = Policy.model_validate_json(deployed.model_dump_json(exclude_unset=True))
    assert shipped.consumer.parallel_calls == 3
    assert shipped.consumer.timeout_seconds == 18
    assert shipped == deployed


def test_plan_prints_the_consumer_it_derives(tmp_path: Path) -> None:
    # Given a policy file stating the vendor's contract only
    config = tmp_path / "sweeper.toml"
    config.write_text(
        '[[policies]]\nname = "exports"\nquota = { limit = 50, period_seconds = 1 }\n'
        '[policies.action]\napi_url = "https://api.example.com"\n'
        "latency_p50_seconds = 0.13\nlatency_p95_seconds = 0.16\n",
        encoding="utf-8",
    )
    result = CliRunner().invoke(main, ["plan", "--config", str(config)])
    # Then the plan is of the consumer synth deploys, and says which figures it derived
    assert result.exit_code == 0, result.output
    assert (
        "  derived          parallel_calls 3, batch_size 9, batch_window_seconds 0, "
        "timeout_seconds 18, memory_mb 320 (from the limits and the vendor's latency; set "
        "[consumer] to override)" in result.output
    )
    assert "  configured       4 environment(s) x 3 call(s)" in result.output


def test_an_app_wide_limit_sizes_the_calls_and_one_busy_store_the_timeout() -> None:
    # Given 2 calls a second per store under 40 for the app (37.72/s at the default headroom)
    policy = Policy.model_validate(
        {
            "name": "listings",
            "action": CONTRACT["action"],
            "limits": [
                {"name": "store", "key": "{tenant_id}", "rate": {"limit": 2, "period_seconds": 1}},
                {"name": "app", "key": "app", "rate": {"limit": 40, "period_seconds": 1}},
            ],
        }
    )
    consumer = derived_consumer(policy)
    # Then the calls in flight carry the app's rate at the fewest stores where it binds alone
    # (37.72 / 1.886 + 1 = 21, each store asked 20/21 of its 0.53 s intervals: a call waits
    # 0.952 x 0.265 = 0.25 s for its store's slot), 37.72 x (0.19 + 0.25) s = 17 over 4
    # environments: 5 each, not one store's 1.886/s (1 call), nor 2 by the service time alone
    assert consumer.parallel_calls == 5
    assert consumer.batch_size == 10
    # and the timeout covers a batch when one store alone is busy: its 10 slots at a quarter
    # of 1.886/s (21.2 s), 2 rounds of 0.19 s and the ledger read, twice, + 5 s
    assert consumer.timeout_seconds == 51
