"""What a plan finds, and which findings fail it: `sweeper plan` exits 1 on an error alone.

An error is a claim the policy cannot keep: its consumers cannot carry the rate it states (its
quota, or the limit that binds), its backlog does not drain (arrivals reach what it completes)
or not before the oldest-eligible-age alarm it sets would fire, or a batch needs more than the
consumer timeout. Everything else is an advisory, a fact with which the policy still works: a
limit no load reaches (a safety cap a rate always binds first), a timeout set far above a
batch's need, consumers below a rate the policy never stated (the default quota, or its kind's
published ceiling such as S3's 3,500 DELETE/s a prefix), scopes that count one key.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from sweeper.config import ConsumerConfig, Policy, Quota
from sweeper_tools.planning.regimes.rate import learned_ceiling


class Severity(StrEnum):
    ERROR = "error"
    ADVISORY = "advisory"


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing the plan says of a policy, and whether it fails the plan."""

    severity: Severity
    text: str


def error(text: str) -> Finding:
    return Finding(Severity.ERROR, text)


def advisory(text: str) -> Finding:
    return Finding(Severity.ADVISORY, text)


def texts(findings: list[Finding], severity: Severity) -> list[str]:
    """The findings of one severity, in the order the plan found them."""
    return [finding.text for finding in findings if finding.severity is severity]


def unstated_rate(policy: Policy) -> str | None:
    """What the rate is when the policy states none (no [[limits]], no [quota] of its own or
    only its kind's published one): a ceiling it never claimed to reach; None when stated.
    (A policy's limits are always listed; the shorthand's one is derived, never set.)"""
    if "limits" in policy.model_fields_set:
        return None
    if "quota" not in policy.model_fields_set:
        return "the default quota"
    published = policy.action.plan_defaults
    if published.quota_limit is None:
        return None
    kind_quota = Quota(limit=published.quota_limit, period_seconds=published.quota_period_seconds)
    return (
        f"its kind's published rate ({policy.action.kind})" if policy.quota == kind_quota else None
    )


def learned_rate(policy: Policy) -> list[Finding]:
    """A scope limit that learns its rate from the vendor: the told rate is the most it gets."""
    learned = learned_ceiling(policy)
    if learned is None:
        return []
    name, told = learned
    return [
        advisory(
            f"limit {name} of policy {policy.name}: rate learned from the vendor, at most {told}"
        )
    ]


def shortfall(policy: Policy, text: str) -> Finding:
    """Consumers that cannot carry the rate (`text`: "policy P cannot ...: why; what to raise"):
    an error against a rate the policy states, else an advisory that says whose rate it is."""
    ceiling = unstated_rate(policy)
    if ceiling is None:
        return error(text)
    _, _, why = text.partition(": ")
    return advisory(
        f"policy {policy.name} runs below {ceiling}, a ceiling it does not claim (it states no "
        f"quota): {why}"
    )


def timeout_findings(
    consumer: ConsumerConfig,
    *,
    batch_seconds: float,
    call_seconds: float,
    needed_seconds: int,
    needed_visibility_seconds: int,
    slack_factor: float,
) -> list[Finding]:
    """A timeout below the batch's need fails; one the policy sets over `slack_factor` times
    the need is an advisory. The default is not judged so: it is there to cover a slow rate's
    batch too, and the plan's timeout line gives the need beside it."""
    timeout = consumer.timeout_seconds
    if timeout < needed_seconds:
        return [
            error(
                f"a batch of {consumer.batch_size} may take {batch_seconds:.1f} s and a call up "
                f"to {call_seconds:g} s: the consumer timeout ({timeout} s) is below the "
                f"{needed_seconds} s that covers them; raise timeout_seconds to "
                f"{needed_seconds} or lower batch_size"
            )
        ]
    if "timeout_seconds" in consumer.model_fields_set and timeout > slack_factor * needed_seconds:
        return [
            advisory(
                f"the consumer timeout ({timeout} s) is over {slack_factor:g}x the "
                f"{needed_seconds} s a batch needs: an environment killed mid-batch delays its "
                f"records up to {consumer.visibility_timeout_seconds} s (the visibility "
                f"timeout), {needed_visibility_seconds} s at timeout_seconds = {needed_seconds}"
            )
        ]
    return []


def drain_findings(
    policy: Policy,
    arrival: float,
    throughput: float,
    drain: float | None,
    interval: float | None,
) -> list[Finding]:
    """A backlog that never drains fails, and so does one whose oldest job would wait past the
    age the policy alarms at (`drain` seconds, then up to a producer `interval`)."""
    if drain is None:
        return [
            error(
                f"arrivals ({arrival:.1f}/s) reach what the policy completes "
                f"({throughput:.1f}/s): the backlog never drains"
            )
        ]
    alarm = policy.alarms.oldest_eligible_age_seconds
    if interval is None or drain + interval <= alarm:
        return []
    return [
        error(
            f"the oldest job would wait about {drain + interval:.0f} s (the backlog drains in "
            f"{drain:.0f} s, the producer runs every {interval:.0f} s), past "
            f"alarms.oldest_eligible_age_seconds ({alarm} s): that alarm would fire; raise what "
            "the consumers complete, or the alarm's age if the wait is meant"
        )
    ]


def scopes_finding(policy: Policy, scopes: int, keys: int) -> list[Finding]:
    """Scopes given that count one key: the job's scope names no field that differs by tenant."""
    if scopes <= keys:
        return []
    return [
        advisory(
            f"{scopes} busy scopes count one key: the scope of policy {policy.name} "
            f"({policy.scope.key_template}) is the same for every call of the policy"
        )
    ]
