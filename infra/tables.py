"""Tables: the idempotency records and the rate limiter's buckets, both on DynamoDB.

Both hold short-lived state (the ledger in PostgreSQL holds the truth), expire items by TTL,
and are billed on demand: a sweeper at rest costs nothing here. Each policy's consumer may touch
only its own policy's items in either (`dynamodb:LeadingKeys` on their keys' prefixes), so a
`python` callable running with its role can disturb no other policy's idempotency or limits.
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from constructs import Construct

from sweeper.config import Policy
from sweeper.consumer.idempotency import idempotency_key_prefix
from sweeper.ledger.wake import wake_key
from sweeper.limiter.keys import CLOSURES_KEY
from sweeper.limiter.live import live_key
from sweeper_tools.deploy.limiter_keys import limiter_key_patterns

#: Powertools' DynamoDBPersistenceLayer defaults: key attribute and expiry attribute.
IDEMPOTENCY_PARTITION_KEY = "id"
IDEMPOTENCY_TTL_ATTRIBUTE = "expiration"
LIMITER_PARTITION_KEY = "pk"
LIMITER_TTL_ATTRIBUTE = "expires_at"

#: What Powertools idempotency does to its table, and nothing more (no Scan, no Query).
IDEMPOTENCY_ACTIONS = (
    "dynamodb:GetItem",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
)
#: A scope's bucket and gate are read (GetItem; several gates at once with BatchGetItem) and
#: conditionally written in place (UpdateItem, which also creates the item): sweeper.limiter
#: never puts a whole item.
LIMITER_ACTIONS = ("dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:UpdateItem")
#: A policy's wake item (sweeper.ledger.wake) is read and conditionally updated in place. It is
#: kept in the limiter table rather than a table of its own: each grant is on that one item
#: (dynamodb:LeadingKeys = wake#POLICY), which gives no function any gate, so a table of its own
#: would add a resource and no narrower grant; the functions that Scan the limiter table (the
#: producer, `status`) may read every item there already, and ignore what is not a gate.
WAKE_ACTIONS = ("dynamodb:GetItem", "dynamodb:UpdateItem")
#: An operator's live change to a limit (sweeper.limiter.live), one item per policy and limit:
#: a consumer only reads its own policy's (least privilege: it never changes a limit); the
#: operator function reads and writes them in place (UpdateItem; a reset too, no DeleteItem).
LIVE_READ_ACTIONS = ("dynamodb:GetItem", "dynamodb:BatchGetItem")
LIVE_WRITE_ACTIONS = ("dynamodb:GetItem", "dynamodb:UpdateItem")


class Tables(Construct):
    """The two DynamoDB tables, on demand, encrypted, with point-in-time recovery."""

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        # Retained: a record lost while its job is still in flight lets a redelivered message
        # call the vendor a second time (a second effect). A replaced or deleted stack leaves
        # the table behind; the records expire by TTL.
        self.idempotency = self._table(
            "Idempotency",
            IDEMPOTENCY_PARTITION_KEY,
            IDEMPOTENCY_TTL_ATTRIBUTE,
            removal_policy=RemovalPolicy.RETAIN,
        )
        # Transient state only: a redeploy after a destroy starts with fresh buckets.
        self.limiter = self._table(
            "Limiter",
            LIMITER_PARTITION_KEY,
            LIMITER_TTL_ATTRIBUTE,
            removal_policy=RemovalPolicy.DESTROY,
        )

    def _table(
        self,
        construct_id: str,
        partition_key: str,
        ttl_attribute: str,
        *,
        removal_policy: RemovalPolicy,
    ) -> dynamodb.Table:
        return dynamodb.Table(
            self,
            construct_id,
            partition_key=dynamodb.Attribute(
                name=partition_key, type=dynamodb.AttributeType.STRING
            ),
            time_to_live_attribute=ttl_attribute,
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            removal_policy=removal_policy,
        )

    def grant_gate_reader(self, grantee: iam.IGrantable) -> None:
        """Read a scope's throttle gate (the redrive waits while it is closed)."""
        self.limiter.grant(grantee, "dynamodb:GetItem")

    def grant_gate_scanner(self, grantee: iam.IGrantable) -> None:
        """List the closed gates (the producer passes over their scopes' rows): the latest
        closure's end first (GetItem on that one item, sweeper.limiter.closures), then a Scan
        only when a closure ends after the instant asked about."""
        self.limiter.grant(grantee, "dynamodb:Scan")
        _grant_items(grantee, self.limiter, ("dynamodb:GetItem",), [CLOSURES_KEY])

    def grant_consumer(self, grantee: iam.IGrantable, policy: Policy) -> None:
        """What a policy's consumer does: its own idempotency records (Powertools writes
        `PREFIX#HASH`) and limiter items (sweeper.limiter.keys), item by item."""
        prefix = idempotency_key_prefix(policy.name)  # a policy name holds no `#`, `*` or `?`
        _grant_items(grantee, self.idempotency, IDEMPOTENCY_ACTIONS, [f"{prefix}#*"])
        _grant_items(grantee, self.limiter, LIMITER_ACTIONS, limiter_key_patterns(policy))
        _grant_items(grantee, self.limiter, LIVE_READ_ACTIONS, [live_key(policy.name, "*")])

    def grant_live_limits(self, grantee: iam.IGrantable, policies: list[str]) -> None:
        """Change these policies' live limits (`sweeper limits set`), and no other item."""
        keys = [live_key(name, "*") for name in policies]  # a policy name holds no `*` or `?`
        _grant_items(grantee, self.limiter, LIVE_WRITE_ACTIONS, keys)

    def grant_wake(self, grantee: iam.IGrantable, policies: list[str]) -> None:
        """Read and lower (or raise) these policies' wake items, and no other item: every
        function that writes the ledger lowers its policy's before the write commits."""
        keys = [wake_key(name) for name in policies]  # a policy name holds no `*` or `?`
        _grant_items(grantee, self.limiter, WAKE_ACTIONS, keys)


def _grant_items(
    grantee: iam.IGrantable, table: dynamodb.Table, actions: tuple[str, ...], keys: list[str]
) -> None:
    """`actions` on the table's items whose partition keys match `keys` (StringLike). Every
    action granted names its item's key (no Scan, no Query), so the condition always applies:
    ForAllValues would let a request without the key through."""
    iam.Grant.add_to_principal(
        grantee=grantee,
        actions=list(actions),
        resource_arns=[table.table_arn],
        conditions={"ForAllValues:StringLike": {"dynamodb:LeadingKeys": keys}},
    )
