"""The default headroom follows from one figure, the arrival jitter, and the docs quote it."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from sweeper.config import DEFAULT_ARRIVAL_JITTER_SECONDS, LATE_SLOT_TOLERANCE_SECONDS, Quota

REPO_ROOT = Path(__file__).resolve().parents[2]


def _section(relative: str, heading: str = "") -> str:
    """From `heading` to the next heading of its level or above (or the whole file), with every
    run of spaces and line breaks as one space: prose wraps anywhere."""
    text = (REPO_ROOT / relative).read_text(encoding="utf-8")
    if heading:
        text = text[text.index(heading) + len(heading) :]
        level = len(heading.split(" ")[0])
        end = re.search(rf"\n#{{1,{level}}} ", text)
        text = text[: end.start()] if end else text
    return " ".join(text.split())


# The policy keys' table moved from the README to docs/configuration.md, the rate cap to
# docs/architecture.md and the benchmark tables to docs/benchmarks.md.
CONFIGURATION = _section("docs/configuration.md")
ARCHITECTURE = _section("docs/architecture.md")
BENCHMARKS = _section("docs/benchmarks.md")


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


def _default_headroom(period_seconds: float) -> float:
    return Quota(limit=1, period_seconds=period_seconds).safe_headroom


def test_the_default_headroom_is_derived_from_the_arrival_jitter_setting() -> None:
    # Given a vendor whose arrival times vary by 100 ms
    quota = Quota(limit=15, period_seconds=1, arrival_jitter_seconds=0.1)
    # Then d = tolerance + jitter = 135 ms, and h = floor(T / (T + d)) to three places
    assert quota.arrival_budget_seconds == pytest.approx(0.135)
    assert quota.safe_headroom == 0.881
    assert quota.rate_per_second == pytest.approx(15 * 0.881)
    assert Quota(limit=15, period_seconds=1).safe_headroom == 0.943  # the default 25 ms


def test_an_explicit_headroom_wins_over_the_jitter() -> None:
    quota = Quota(limit=15, period_seconds=1, arrival_jitter_seconds=0.5, headroom=0.99)
    assert quota.effective_headroom == 0.99


@pytest.mark.parametrize("jitter", [-0.001, 11])
def test_a_jitter_out_of_range_is_refused(jitter: float) -> None:
    with pytest.raises(ValueError, match="arrival_jitter_seconds"):
        Quota(limit=1, period_seconds=1, arrival_jitter_seconds=jitter)


@pytest.mark.parametrize("period", [0.5, 1.0, 5.0, 60.0])
@pytest.mark.parametrize("jitter", [0.0, 0.025, 0.2])
@pytest.mark.parametrize("limit", [1, 7, 15, 75, 1000])
def test_the_derived_headroom_never_exceeds_the_quota_despite_the_jitter(
    period: float, jitter: float, limit: int
) -> None:
    quota = Quota(limit=limit, period_seconds=period, arrival_jitter_seconds=jitter)
    d = quota.arrival_budget_seconds
    most_in_any_window = math.floor((period + d) * quota.rate_per_second) + 1
    assert most_in_any_window <= limit


def test_the_decisions_quote_the_codes_figures() -> None:
    entry = _section("docs/decisions.md", "## 2026-11-29: The default headroom is derived from")
    assert re.findall(r"late-slot tolerance, (\d+) ms", entry) == [
        str(_ms(LATE_SLOT_TOLERANCE_SECONDS))
    ]
    assert re.findall(r"`quota\.arrival_jitter_seconds`, default (\d+) ms", entry) == [
        str(_ms(DEFAULT_ARRIVAL_JITTER_SECONDS))
    ]
    total = _ms(Quota(limit=1, period_seconds=1).arrival_budget_seconds)
    assert set(re.findall(r"d = (\d+) ms", entry)) == {str(total)}
    one, five = re.findall(
        r"default headroom is (0\.\d+) for a 1-second window and (0\.\d+) for a 5-second", entry
    )[0]
    assert (float(one), float(five)) == (_default_headroom(1), _default_headroom(5))


def test_the_docs_quote_the_codes_figures() -> None:
    row = re.search(r"\| `quota\.arrival_jitter_seconds` \| `([\d.]+)` \|", CONFIGURATION)
    assert row is not None
    assert float(row.group(1)) == DEFAULT_ARRIVAL_JITTER_SECONDS
    formula = re.search(
        r"`T/\(T \+ ([\d.]+) s \+ arrival_jitter_seconds\)`, (0\.\d+) for T = 1 s", CONFIGURATION
    )
    assert formula is not None
    assert float(formula.group(1)) == LATE_SLOT_TOLERANCE_SECONDS
    assert float(formula.group(2)) == _default_headroom(1)
    for text in (ARCHITECTURE, BENCHMARKS):
        assert set(re.findall(r"the (\d+) ms late-slot tolerance", text)) == {
            str(_ms(LATE_SLOT_TOLERANCE_SECONDS))
        }
    # The benchmark table ran with the default headroom for each quota it names.
    benched = re.findall(r"headroom (0\.\d+)\) \| (\d+) / (\d+) s", BENCHMARKS)
    assert benched
    for headroom, _limit, period in benched:
        assert float(headroom) == _default_headroom(float(period))


def test_the_deploy_guide_quotes_the_default_jitter() -> None:
    section = _section("docs/deploy.md", "### Measuring arrival jitter")
    assert re.findall(r"default (\d+) ms", section) == [str(_ms(DEFAULT_ARRIVAL_JITTER_SECONDS))]


def test_a_slack_adds_to_the_arrival_budget_and_costs_headroom() -> None:
    # Given a sliding window of 1 s at 100/s whose slots may be used 0.5 s after their time
    quota = Quota(limit=100, period_seconds=1, slack_seconds=0.5)
    # Then a call may reach the vendor W + d = 0.5 + 0.06 s after its slot, and h = T / (T + a)
    assert quota.arrival_budget_seconds == pytest.approx(0.56)
    assert quota.safe_headroom == math.floor(1000 / 1.56) / 1000 == 0.641
    # While without a slack nothing changes
    assert Quota(limit=100, period_seconds=1).safe_headroom == 0.943


def test_a_bucket_with_a_slack_takes_it_in_its_formula() -> None:
    # Given a bucket of 6 at 15/s (tolerance 1/3 s, which covers the 60 ms budget alone)
    plain = Quota.parse("15/1s bucket:6")
    slack = plain.model_copy(update={"slack_seconds": 0.5})
    # Then with a slack of 0.5 s its headroom is 1 / (1 + R (W + d - t) / B)
    exact = 1 / (1 + 15 * (0.56 - 5 / 15) / 6)
    assert plain.safe_headroom == 0.99
    assert slack.safe_headroom == math.floor(exact * 1000) / 1000
    # And a bucket of one gets much slower: 1 / (1 + R (W + d))
    one = Quota(limit=15, period_seconds=1, algorithm="bucket", slack_seconds=0.5)
    assert one.safe_headroom == math.floor(1000 / (1 + 15 * 0.56)) / 1000 == 0.106


def test_a_slack_longer_than_the_period_is_refused_with_the_fix() -> None:
    with pytest.raises(ValueError, match="set it at most period_seconds"):
        Quota(limit=10, period_seconds=1, slack_seconds=1.5)
    with pytest.raises(ValueError, match="slack_seconds"):
        Quota(limit=10, period_seconds=1, slack_seconds=-0.1)
    assert Quota(limit=10, period_seconds=1, slack_seconds=1.0).slack_seconds == 1.0


def test_an_explicit_headroom_above_what_the_slack_allows_is_refused() -> None:
    # A slack is only safe at its headroom: one set above it would let the vendor refuse
    with pytest.raises(ValueError, match="leave headroom out or lower it"):
        Quota(limit=100, period_seconds=1, slack_seconds=0.5, headroom=0.8)
    assert Quota(limit=100, period_seconds=1, slack_seconds=0.5, headroom=0.6).headroom == 0.6
    # without a slack an explicit headroom is the operator's own, as before
    assert Quota(limit=100, period_seconds=1, headroom=0.99).headroom == 0.99
