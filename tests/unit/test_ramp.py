"""`sweeper ramp-check`'s rule: each threshold at its boundary, and the size of a raise."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from sweeper.config import ConsumerConfig
from sweeper.models import OutcomeClass
from sweeper_tools.ramp import (
    HOLD_DEAD_LETTER_SHARE,
    HOLD_DUPLICATE_RATE,
    HOLD_P95_TIMEOUT_FRACTION,
    HOLD_THROTTLED_RATE,
    LOWER_DEAD_LETTER_SHARE,
    LOWER_THROTTLED_RATE,
    MAX_RAISE_STEP,
    MIN_CALLS,
    RampFigures,
    decide,
    figures_from_emf,
    percentile,
)

#: 10 records of a batch share a 60 s timeout: 6 s each; half of it is the hold line.
CONSUMER = ConsumerConfig(reserved_concurrency=4, max_concurrency=4, timeout_seconds=60)
BUDGET = CONSUMER.timeout_seconds / CONSUMER.batch_size
#: 100 calls/s x p50 0.1 s needs 10 environments: 4 run, so a healthy window raises.
RATE = 100.0


def healthy(**changes: Any) -> RampFigures:
    base: dict[str, Any] = {
        "hours": 1.0,
        "attempts": {"accepted": 10_000.0},
        "succeeded": 10_000.0,
        "p50_seconds": 0.1,
        "p95_seconds": 0.2,
    }
    return RampFigures(**{**base, **changes})


def with_throttled(rate: float) -> RampFigures:
    throttled = rate * 10_000
    return healthy(attempts={"accepted": 10_000 - throttled, "throttled": throttled})


def test_a_healthy_window_raises_towards_what_the_quota_needs() -> None:
    decision = decide(healthy(), CONSUMER, RATE)
    assert (decision.verdict, decision.current, decision.recommended) == ("raise", 4, 8)


def test_a_raise_never_passes_what_the_quota_needs() -> None:
    # 100/s x 0.05 s = 5 environments
    decision = decide(healthy(p50_seconds=0.05), CONSUMER, RATE)
    assert (decision.verdict, decision.recommended) == ("raise", 5)


def test_a_raise_adds_at_most_the_step() -> None:
    big = ConsumerConfig(reserved_concurrency=20, max_concurrency=20)
    decision = decide(healthy(p50_seconds=10.0, p95_seconds=1.0), big, RATE)
    assert decision.recommended == 20 + MAX_RAISE_STEP


def test_enough_environments_for_the_quota_hold() -> None:
    # 100/s x 0.04 s = 4 environments, and 4 run
    decision = decide(healthy(p50_seconds=0.04, p95_seconds=0.05), CONSUMER, RATE)
    assert (decision.verdict, decision.recommended) == ("hold", 4)
    assert "the quota bounds throughput" in decision.reasons[0]


def test_a_cautious_start_raises_from_one_environment_to_two() -> None:
    one = ConsumerConfig(reserved_concurrency=1, max_concurrency=2)
    decision = decide(healthy(), one, RATE)
    assert (decision.verdict, decision.current, decision.recommended) == ("raise", 1, 2)
    assert (decision.reserved_concurrency, decision.max_concurrency) == (2, 2)


def test_lowering_one_environment_keeps_one_and_the_event_sources_floor() -> None:
    one = ConsumerConfig(reserved_concurrency=1, max_concurrency=2)
    decision = decide(with_throttled(0.5), one, RATE)
    assert (decision.verdict, decision.reserved_concurrency, decision.max_concurrency) == (
        "lower",
        1,
        2,
    )


@pytest.mark.parametrize(
    ("calls", "verdict"), [(MIN_CALLS - 1, "insufficient"), (MIN_CALLS, "raise")]
)
def test_too_few_calls_are_no_evidence(calls: int, verdict: str) -> None:
    figures = healthy(attempts={"accepted": float(calls)}, succeeded=float(calls))
    assert decide(figures, CONSUMER, RATE).verdict == verdict


@pytest.mark.parametrize(
    ("rate", "verdict"),
    [
        (HOLD_THROTTLED_RATE, "raise"),
        (HOLD_THROTTLED_RATE + 0.0001, "hold"),
        (LOWER_THROTTLED_RATE, "hold"),
        (LOWER_THROTTLED_RATE + 0.0001, "lower"),
    ],
)
def test_the_429_rate_holds_then_lowers(rate: float, verdict: str) -> None:
    decision = decide(with_throttled(rate), CONSUMER, RATE)
    assert decision.verdict == verdict
    if verdict == "lower":
        assert decision.recommended == 2
        assert "429 rate" in decision.reasons[0]


@pytest.mark.parametrize(
    ("share", "verdict"),
    [
        (HOLD_DEAD_LETTER_SHARE, "raise"),
        (HOLD_DEAD_LETTER_SHARE + 0.0001, "hold"),
        (LOWER_DEAD_LETTER_SHARE, "hold"),
        (LOWER_DEAD_LETTER_SHARE + 0.0001, "lower"),
    ],
)
def test_the_dlq_share_holds_then_lowers(share: float, verdict: str) -> None:
    # share = bound / (settled + bound), with settled + bound = 10 000
    bound = share * 10_000
    decision = decide(healthy(succeeded=10_000 - bound, dead_letter_bound=bound), CONSUMER, RATE)
    assert decision.verdict == verdict


@pytest.mark.parametrize(
    ("rate", "verdict"), [(HOLD_DUPLICATE_RATE, "raise"), (HOLD_DUPLICATE_RATE + 0.0001, "hold")]
)
def test_the_duplicate_rate_holds(rate: float, verdict: str) -> None:
    duplicates = rate * 10_000  # of 10 000 deliveries that reached the ledger
    decision = decide(healthy(succeeded=10_000 - duplicates, duplicates=duplicates), CONSUMER, RATE)
    assert decision.verdict == verdict


@pytest.mark.parametrize(
    ("p95", "verdict"),
    [
        (HOLD_P95_TIMEOUT_FRACTION * BUDGET, "raise"),
        (HOLD_P95_TIMEOUT_FRACTION * BUDGET + 0.001, "hold"),
        (BUDGET - 0.001, "hold"),
        (BUDGET, "lower"),
    ],
)
def test_the_p95_delivery_time_against_the_timeout_holds_then_lowers(
    p95: float, verdict: str
) -> None:
    assert decide(healthy(p95_seconds=p95), CONSUMER, RATE).verdict == verdict


def test_without_delivery_times_nothing_is_raised() -> None:
    decision = decide(healthy(p50_seconds=None, p95_seconds=None), CONSUMER, RATE)
    assert decision.verdict == "hold"


def test_every_reason_is_given_when_several_figures_are_off() -> None:
    figures = healthy(attempts={"accepted": 9_000.0, "throttled": 1_000.0}, duplicates=500.0)
    decision = decide(figures, CONSUMER, RATE)
    assert decision.verdict == "lower"
    assert [r.split(" ")[0] for r in decision.reasons] == ["429", "duplicate"]


def test_the_rates_have_the_documented_denominators() -> None:
    figures = RampFigures(
        hours=1,
        attempts={"accepted": 90.0, "throttled": 10.0},
        succeeded=80.0,
        terminal=10.0,
        duplicates=10.0,
        dead_letter_bound=10.0,
    )
    assert figures.calls == 100
    assert figures.throttled_rate == pytest.approx(0.1)
    assert figures.duplicate_rate == pytest.approx(10 / 100)
    assert figures.dead_letter_share == pytest.approx(10 / 100)


def test_percentile_is_the_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert (percentile(values, 50), percentile(values, 95)) == (50.0, 95.0)
    assert percentile([3.0], 95) == 3.0
    assert percentile([], 95) is None


NOW = datetime(2026, 11, 29, 2, 0, tzinfo=UTC)


def emf(at: datetime, policy: str, **metrics: float | list[float]) -> str:
    return json.dumps(
        {
            "_aws": {
                "Timestamp": int(at.timestamp() * 1000),
                "CloudWatchMetrics": [
                    {
                        "Namespace": "Sweeper",
                        "Dimensions": [["service", "policy"]],
                        "Metrics": [{"Name": name, "Unit": "Count"} for name in metrics],
                    }
                ],
            },
            "service": "sweeper",
            "policy": policy,
            **metrics,
        }
    )


def test_emf_lines_of_the_policy_within_the_window_are_summed() -> None:
    start = NOW - timedelta(hours=1)
    lines = [
        emf(
            NOW - timedelta(minutes=5),
            "exports",
            Attempts_accepted=[1, 1],
            Succeeded=2,
            ProcessingSeconds=[0.1, 0.3],
        ),
        emf(
            NOW - timedelta(minutes=4),
            "exports",
            Attempts_throttled=1,
            DeadLetterBound=1,
            Duplicates=1,
            TerminalFailures=1,
            ProcessingSeconds=0.2,
        ),
        emf(NOW - timedelta(minutes=3), "other", Attempts_accepted=50),
        emf(NOW - timedelta(hours=2), "exports", Attempts_accepted=50),
        emf(NOW, "exports", Attempts_accepted=50),  # the window's end is open
        '{"level": "INFO", "message": "settled", "operation_key": "k"}',
        '{"_aws": not json',
    ]
    figures = figures_from_emf(lines, "exports", start, NOW)
    assert figures.attempts == {"accepted": 2.0, "throttled": 1.0}
    assert (figures.succeeded, figures.terminal, figures.duplicates) == (2.0, 1.0, 1.0)
    assert figures.dead_letter_bound == 1.0
    assert (figures.p50_seconds, figures.p95_seconds) == (0.2, 0.3)
    assert figures.hours == 1.0


def test_the_runbook_quotes_the_thresholds_the_code_applies() -> None:
    from pathlib import Path

    import sweeper_tools.ramp as ramp

    runbook = (Path(__file__).parents[2] / "docs" / "runbook.md").read_text(encoding="utf-8")

    def pct(value: float) -> str:
        return f"{value * 100:g} %"

    rows = {
        "| 429 rate |": (ramp.HOLD_THROTTLED_RATE, ramp.LOWER_THROTTLED_RATE),
        "| duplicate rate |": (ramp.HOLD_DUPLICATE_RATE, None),
        "| DLQ share |": (ramp.HOLD_DEAD_LETTER_SHARE, ramp.LOWER_DEAD_LETTER_SHARE),
    }
    for start, (hold, lower) in rows.items():
        (line,) = [row for row in runbook.splitlines() if row.startswith(start)]
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        assert cells[2] == pct(hold), line
        assert cells[3] == (pct(lower) if lower is not None else "-"), line
    assert f"{pct(ramp.HOLD_P95_TIMEOUT_FRACTION)} of it" in runbook
    assert f"Fewer than {ramp.MIN_CALLS} vendor calls" in runbook
    assert f"at most {ramp.MAX_RAISE_STEP} more" in runbook


def test_cloudwatch_figures_come_from_the_consumers_metrics_and_percentiles() -> None:
    import boto3
    from botocore.stub import Stubber

    from sweeper_tools.ramp import figures_from_cloudwatch

    # Given CloudWatch answering each query of the window (one period), split over two pages
    client = boto3.client(
        "cloudwatch",
        region_name="eu-west-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    sent: list[dict[str, Any]] = []
    client.meta.events.register(
        "provide-client-params.cloudwatch.GetMetricData", lambda params, **_: sent.append(params)
    )
    answers = {
        ("Attempts_accepted", "Sum"): [990.0],
        ("Attempts_throttled", "Sum"): [6.0, 4.0],
        ("Succeeded", "Sum"): [990.0],
        ("DeadLetterBound", "Sum"): [1.0],
        ("ProcessingSeconds", "p50"): [0.08],
        ("ProcessingSeconds", "p95"): [0.2, 0.3],
    }
    start = NOW - timedelta(hours=6)
    with Stubber(client) as stub:
        ids: dict[tuple[str, str], str] = {}

        def respond(page: int, token: str | None) -> None:
            results = [
                {"Id": ids[k], "Label": k[0], "Values": [v[page]], "StatusCode": "Complete"}
                for k, v in answers.items()
                if len(v) > page
            ]
            stub.add_response(
                "get_metric_data",
                {"MetricDataResults": results, **({"NextToken": token} if token else {})},
            )

        # the ids are m0..mN in query order: learn them from the query the adapter builds
        names = [f"Attempts_{o.value}" for o in OutcomeClass]
        order = [
            (n, "Sum")
            for n in [*names, "Succeeded", "TerminalFailures", "Duplicates", "DeadLetterBound"]
        ]
        order += [("ProcessingSeconds", "p50"), ("ProcessingSeconds", "p95")]
        ids = {key: f"m{i}" for i, key in enumerate(order)}
        respond(0, "next")
        respond(1, None)
        # When the figures are read
        figures = figures_from_cloudwatch(client, "exports", start, NOW)
    # Then sums add up across pages, and the largest percentile of the periods is kept
    assert figures.attempts == {"accepted": 990.0, "throttled": 10.0}
    assert (figures.succeeded, figures.dead_letter_bound) == (990.0, 1.0)
    assert (figures.p50_seconds, figures.p95_seconds) == (0.08, 0.3)
    assert figures.hours == 6.0
    # and every query names the consumer's namespace and dimensions, one period for the window
    queries = sent[0]["MetricDataQueries"]
    assert [
        (q["MetricStat"]["Metric"]["MetricName"], q["MetricStat"]["Stat"]) for q in queries
    ] == (order)
    for query in queries:
        stat = query["MetricStat"]
        assert stat["Metric"]["Namespace"] == "Sweeper"
        assert stat["Metric"]["Dimensions"] == [
            {"Name": "service", "Value": "sweeper"},
            {"Name": "policy", "Value": "exports"},
        ]
        assert stat["Period"] == 6 * 3600
