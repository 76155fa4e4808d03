"""What the vendor saw of a demo's calls, by the contract its policy's action calls.

The simulator's contracts each keep an audit (sweeper_local.vendor): the default delete
contract counts calls, effects and idempotency keys by key, the listings marketplace, the
payments provider, GitHub's artifacts API and the GraphQL API their own; an s3_delete action's
bucket shows its deletes as delete markers (sweeper_local.action_targets). An outside vendor
keeps none: its figures are None.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal
from urllib.parse import urlsplit

from sweeper.config import Policy, Quota
from sweeper.ledger.rows import Settled
from sweeper_local.action_targets import audit_bucket, s3_delete_action
from sweeper_local.errors import LocalStackError
from sweeper_local.github_artifacts import ARTIFACTS_PATH_RE
from sweeper_local.graphql_cost import is_graphql_path
from sweeper_local.helpdesk import TICKETS_PREFIX
from sweeper_local.marketplace import STORES_PREFIX
from sweeper_local.refunds import REFUNDS_PATH
from sweeper_local.stack import LocalStack
from sweeper_local.vendor import (
    RECONCILIATIONS_PATH,
    VendorAudit,
    VendorSimulator,
    fetch_audit,
    fetch_github_audit,
    fetch_graphql_audit,
    fetch_listings_audit,
    fetch_payments_audit,
)

#: Before any job of a demo settled: its settlements are counted from here.
SINCE_EVER = datetime(2000, 1, 1, tzinfo=UTC)

#: The simulator's contracts a policy's action may call (sweeper_local.vendor), or a bucket of
#: the AWS emulator (an s3_delete action's, sweeper_local.action_targets).
Contract = Literal[
    "delete", "listings", "payments", "helpdesk", "refunds", "github", "graphql", "bucket"
]


def _in_process_figures(
    vendor: VendorSimulator | None, contract: Literal["helpdesk", "refunds"]
) -> ContractFigures | None:
    """The help desk's or the refunds provider's audit, kept in this process only (an outside
    simulator: None)."""
    if vendor is None:
        return None
    if contract == "helpdesk":
        desk = vendor.helpdesk.audit()
        statuses, effects = desk.responses_by_status, desk.effects_by_ticket
    else:
        refunds = vendor.refunds.audit()
        statuses, effects = refunds.responses_by_status, refunds.effects_by_charge
    return ContractFigures(
        sum(statuses.values()),
        sum(effects.values()),
        statuses.get(429, 0),
        max(effects.values(), default=0),
    )


def _remote_audit(api_url: str) -> VendorAudit | None:
    """The audit of an external simulator, when it has one; a real vendor has none."""
    try:
        return fetch_audit(api_url, timeout_seconds=5)
    except (OSError, ValueError, KeyError):
        return None


def vendor_contract(policy: Policy) -> Contract:
    """Which of the simulator's contracts the policy's action calls, by its URL's path: the
    listings marketplace, the payments provider, or the default delete contract; an s3_delete
    action's bucket."""
    if s3_delete_action(policy) is not None:
        return "bucket"
    template = getattr(policy.action, "url_template", None)
    if not isinstance(template, str):
        return "delete"
    path = urlsplit(template.replace("{api_url}", "http://vendor")).path
    if path.startswith(STORES_PREFIX):
        return "listings"
    if path == RECONCILIATIONS_PATH:
        return "payments"
    if path.startswith(TICKETS_PREFIX):
        return "helpdesk"
    if path == REFUNDS_PATH:
        return "refunds"
    if ARTIFACTS_PATH_RE.match(path):
        return "github"
    if is_graphql_path(path):
        return "graphql"
    return "delete"


@dataclass(frozen=True)
class ContractFigures:
    """What the vendor's audit of one contract counted of a policy's calls, at one time (a
    bucket counts its deletes, not the calls or throttles that led to them: None)."""

    calls: int | None
    effects: int
    throttled: int | None
    max_effects_per_object: int

    def since(self, before: ContractFigures | None) -> ContractFigures:
        """The figures of the calls made after `before` was read."""
        if before is None:
            return self
        return ContractFigures(
            _minus(self.calls, before.calls),
            self.effects - before.effects,
            _minus(self.throttled, before.throttled),
            self.max_effects_per_object,
        )


def _minus(now: int | None, before: int | None) -> int | None:
    return None if now is None or before is None else now - before


def contract_figures(
    stack: LocalStack, contract: Contract, policy: Policy
) -> ContractFigures | None:
    """The audit of the contract the policy calls (None: the vendor keeps none)."""
    assert stack.api_url is not None
    url = stack.api_url
    vendor = stack.vendor
    if contract == "bucket":
        deletes = audit_bucket(stack.aws, policy)
        if deletes is None:
            return None
        return ContractFigures(None, deletes.deleted, None, deletes.most_deletes_of_one_object)
    try:
        if contract == "listings":
            listings = vendor.listings_audit() if vendor else fetch_listings_audit(url, 5)
            return ContractFigures(
                listings.calls_total,
                sum(listings.effects_by_listing.values()),
                listings.responses_by_status.get(429, 0),
                max(listings.effects_by_listing.values(), default=0),
            )
        if contract == "payments":
            payments = vendor.payments_audit() if vendor else fetch_payments_audit(url, 5)
            return ContractFigures(
                payments.calls_total,
                payments.effects_total,
                payments.responses_by_status.get(429, 0),
                max(payments.effects_by_pair.values(), default=0),
            )
        if contract in ("helpdesk", "refunds"):
            return _in_process_figures(vendor, contract)
        if contract == "github":
            github = vendor.github.audit() if vendor else fetch_github_audit(url, 5)
            return ContractFigures(
                github.calls_total,
                sum(github.effects_by_artifact.values()),
                sum(github.refused_by_limit.values()),
                max(github.effects_by_artifact.values(), default=0),
            )
        if contract == "graphql":
            points = vendor.graphql.audit() if vendor else fetch_graphql_audit(url, 5)
            return ContractFigures(
                points.calls_total,
                sum(points.effects_by_id.values()),
                points.throttled_total,
                max(points.effects_by_id.values(), default=0),
            )
    except (OSError, ValueError, KeyError):
        return None  # an outside vendor without the simulator's audit
    audit = vendor_audit(stack)
    if audit is None:
        return None
    ours = [n for key, n in audit.effects_by_key.items() if key.startswith(f"{policy.name}:")]
    return ContractFigures(
        _ours(audit.calls_by_key, policy.name),
        sum(ours),
        audit.throttled_total,
        max(ours, default=0),
    )


def vendor_audit(stack: LocalStack) -> VendorAudit | None:
    assert stack.api_url is not None
    return stack.vendor.audit() if stack.vendor is not None else _remote_audit(stack.api_url)


def vendor_utilization(arrivals: tuple[float, ...], quota: Quota) -> float | None:
    """Calls after the first over what the quota allows across their span (None: too few).

    n calls at exactly the quota's rate r span (n - 1) / r seconds: that is 1.0.
    """
    if len(arrivals) < 2 or arrivals[-1] <= arrivals[0]:
        return None
    rate = quota.limit / quota.period_seconds  # the vendor's, before headroom
    return round((len(arrivals) - 1) / (rate * (arrivals[-1] - arrivals[0])), 3)


def _ours(by_key: dict[str, int], policy: str) -> int:
    return sum(n for key, n in by_key.items() if key.startswith(f"{policy}:"))


def key_stats(audit: VendorAudit | None, policy: str) -> tuple[int | None, int | None]:
    """Distinct idempotency keys this run sent, and the most keys the vendor saw for one object."""
    if audit is None:
        return None, None
    ours = [
        [k for k in keys if k.startswith(f"{policy}:")] for keys in audit.keys_by_target.values()
    ]
    ours = [keys for keys in ours if keys]
    return sum(len(k) for k in ours), max((len(k) for k in ours), default=0)


def settled_rate(settled: Settled) -> float | None:
    """Jobs settled per second between the first and the last settlement (None: too few)."""
    if settled.count < 2 or settled.first is None or settled.last is None:
        return None
    span = (settled.last - settled.first).total_seconds()
    return None if span <= 0 else round((settled.count - 1) / span, 3)


def aws_requests(stack: LocalStack) -> dict[str, int] | None:
    """The SQS and DynamoDB requests the stand-in served so far (None: moto counts none)."""
    try:
        return stack.aws.requests()
    except LocalStackError:
        return None


def requests_per_job(
    before: dict[str, int] | None, after: dict[str, int] | None, jobs: int
) -> dict[str, float] | None:
    """The requests made between two counts, per job, by `service:Operation`."""
    if before is None or after is None or jobs <= 0:
        return None
    made = {name: count - before.get(name, 0) for name, count in after.items()}
    return {name: round(count / jobs, 2) for name, count in sorted(made.items()) if count}
