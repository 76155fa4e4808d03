"""One policy's pipeline: schedule → producer → work queue (+ DLQ) → consumer.

The work queue is a standard queue: the producer sets the tenant as MessageGroupId on every
message, which makes SQS treat it as a fair queue (a tenant with a large backlog does not
delay the others' messages). Parallelism is capped twice: reserved concurrency on the consumer,
and the event source's maximum concurrency, never above it (docs/decisions.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from aws_cdk import Annotations, Duration
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda_event_sources as event_sources
from constructs import Construct

from infra.function import HTTPS_PORT
from infra.ledger_function import LedgerAccess, LedgerFunction
from infra.nag import acknowledge
from infra.naming import deployment_name
from infra.packaging import REPO_ROOT, action_code_layer
from infra.queues import queue_with_dead_letters
from infra.tables import Tables
from infra.tracing import trace_consumer
from sweeper.config import Policy
from sweeper.errors import ConfigError
from sweeper.limits import LAMBDA_MAX_TIMEOUT_SECONDS
from sweeper_tools.deploy import deploy_for
from sweeper_tools.deploy.limiter_keys import unconfined_limits
from sweeper_tools.event_source import check_policy_event_source
from sweeper_tools.planning.plan import limit_warnings, quota_warning

PRODUCER_MEMORY_MB = 512
#: The producer stops starting pages at its budget; Lambda's timeout leaves room to finish one.
PRODUCER_TIMEOUT_MARGIN_SECONDS = 30
SQS_QUEUE_NAME_MAX_LENGTH = 80


class Pipeline(Construct):
    """Queues and functions of one policy, and the grants between them."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        policy: Policy,
        ledger: LedgerAccess,
        tables: Tables,
        policy_dir: Path | None = None,
        sharing: Sequence[Policy] = (),
    ) -> None:
        """`policy_dir`: the policy file's directory, against which the action's relative paths
        (a `python` kind's package) are read; the repository root by default. `sharing`: the
        file's other policies (a limit of theirs with the same name and key shares its keys)."""
        super().__init__(scope, construct_id)
        self.policy = policy
        self.sharing = list(sharing)
        self.policy_dir = policy_dir or REPO_ROOT
        for error in deploy_for(policy.action).synth_errors(self.policy_dir):
            raise ConfigError(f"policy {policy.name}: {error}")
        consumer_config = policy.consumer
        visibility_seconds = consumer_config.visibility_timeout_seconds
        check_policy_event_source(policy, visibility_seconds)

        work_queue_name = f"{deployment_name(self)}-{policy.name}-work"
        assert len(work_queue_name) <= SQS_QUEUE_NAME_MAX_LENGTH  # both parts are bounded
        self.queue, self.dead_letter_queue = queue_with_dead_letters(
            self,
            queue_id="WorkQueue",
            queue_arn_id="WorkQueueArn",
            queue_name=work_queue_name,
            visibility_seconds=visibility_seconds,
            max_receive_count=consumer_config.max_receive_count,
        )

        self.producer = LedgerFunction(
            self,
            "Producer",
            policy=policy,
            ledger=ledger,
            aws_apis="SQS and Secrets Manager",
            code_name="producer",
            description=f"{policy.name} producer: pages due ledger rows into the work queue",
            environment={
                "SWEEPER_QUEUE_URL": self.queue.queue_url,
                # The producer passes over the rows of scopes whose gate is closed.
                "SWEEPER_LIMITER_TABLE": tables.limiter.table_name,
            },
            timeout_seconds=producer_timeout_seconds(policy),
            memory_mb=PRODUCER_MEMORY_MB,
        )
        self.queue.grant_send_messages(self.producer.role)
        tables.grant_gate_scanner(self.producer.role)
        # DynamoDB is a gateway endpoint: its traffic leaves for the service's prefix list.
        self.producer.allow_https_to(ledger.network.dynamodb_peer, "DynamoDB (the throttle gates)")
        self.producer_schedule = self.producer.run_on_schedule(
            policy.schedule, "run the producer", schedule_id="ProducerSchedule"
        )

        # Its HTTPS rules are its own (_grant_action_access): they follow the action's kind.
        self.consumer = LedgerFunction(
            self,
            "Consumer",
            policy=policy,
            ledger=ledger,
            aws_apis=None,
            code_name="consumer",
            description=f"{policy.name} consumer: calls the API once per job, idempotently",
            environment={
                # The consumer changes the visibility of messages it defers (rate limit, gate).
                "SWEEPER_QUEUE_URL": self.queue.queue_url,
                "SWEEPER_IDEMPOTENCY_TABLE": tables.idempotency.table_name,
                "SWEEPER_LIMITER_TABLE": tables.limiter.table_name,
                # INFO: a line per batch (sweeper.consumer.batch_log); DEBUG: one per job too.
                "POWERTOOLS_LOG_LEVEL": consumer_config.log_level,
            },
            timeout_seconds=consumer_config.timeout_seconds,
            memory_mb=consumer_config.memory_mb,
            reserved_concurrency=consumer_config.reserved_concurrency,
            reaches_dynamodb=True,  # its own rules do (_grant_action_access), wake item included
        )
        self.consumer.function.add_event_source(
            event_sources.SqsEventSource(
                self.queue,
                batch_size=consumer_config.batch_size,
                max_batching_window=Duration.seconds(consumer_config.batch_window_seconds),
                report_batch_item_failures=True,
                max_concurrency=consumer_config.max_concurrency,
            )
        )
        tables.grant_consumer(self.consumer.role, policy)
        trace_consumer(self.consumer.function, policy)  # X-Ray: the policy's mode (infra/tracing)
        for template in unconfined_limits(policy):
            Annotations.of(self).add_warning_v2(
                "sweeper:LimiterKeysUnconfined",
                f"policy {policy.name}: its scope key {template!r} begins with a per-call field, "
                "so its consumer may touch every limiter scope (start the key with {policy}, "
                "{host} or a constant to confine it to its own keys)",
            )
        self._grant_action_access(ledger)
        self._warn_when_quota_unreachable()
        self._warn_when_a_limit_is_unreachable()

    def _warn_when_quota_unreachable(self) -> None:
        """With the vendor's latency measured (action.latency_*), say at synth when the
        consumers cannot reach the quota (`sweeper plan` gives the figures)."""
        warning = quota_warning(self.policy)
        if warning is not None:
            Annotations.of(self).add_warning_v2("sweeper:QuotaUnreachable", warning)

    def _warn_when_a_limit_is_unreachable(self) -> None:
        """With [[limits]], say at synth which limit no load can reach: one held under a
        tighter key of another, or, with the latency measured, one past what the consumers
        complete (sweeper_tools.planning.plan.limit_warnings states the rules)."""
        for warning in limit_warnings(self.policy, self.sharing):
            Annotations.of(self).add_warning_v2("sweeper:LimitUnreachable", warning)

    def _grant_action_access(self, ledger: LedgerAccess) -> None:
        """What the policy's action kind says it needs (sweeper_tools.deploy): its IAM
        statements, its AWS APIs' endpoints and its vendor's ports, besides the consumer's own
        DynamoDB and SQS. Nothing here knows one kind from another."""
        action = deploy_for(self.policy.action)
        network = ledger.network
        for warning in action.synth_warnings():
            Annotations.of(self).add_warning_v2(
                "sweeper:ActionPath", f"policy {self.policy.name}: {warning}"
            )
        for grant in action.grants():
            self.consumer.role.add_to_principal_policy(
                iam.PolicyStatement(
                    actions=list(grant.actions),
                    resources=list(grant.resources),
                    conditions=grant.condition_block() or None,
                )
            )
            for resource in grant.resources:
                if "*" in resource:
                    # Each wildcard the kind asks for, with the kind's own reason, one by one.
                    acknowledge(
                        self.consumer.role,
                        f"AwsSolutions-IAM5[Resource::{resource}]",
                        grant.wildcard_reason,
                    )
        code = action.layer_dir(self.policy_dir)
        if code is not None:
            # The team's own code (a `python` kind): a layer of its own, on this consumer only.
            self.consumer.function.add_layers(
                action_code_layer(self, "ActionCodeLayer", code, self.policy.name)
            )
        path = action.network_path()
        peers = {service: network.peer_for(service) for service in sorted(path.aws_services)}
        if path.internet_ports:
            # HTTPS to anywhere covers DynamoDB (gateway endpoint, public prefix list), the
            # interface endpoints and the vendor, whose addresses are not known in advance.
            self.consumer.allow_https_to(ec2.Peer.any_ipv4(), "vendor API, DynamoDB, AWS endpoints")
            for port in sorted(set(path.internet_ports) - {HTTPS_PORT}):
                self.consumer.security_group.add_egress_rule(
                    ec2.Peer.any_ipv4(), ec2.Port.tcp(port), "vendor API"
                )
            return
        self.consumer.allow_https_to(network.dynamodb_peer, "DynamoDB (limiter, idempotency)")
        self.consumer.allow_https_to(network.aws_api_peer, "SQS (message visibility)")
        for service, peer in peers.items():
            self.consumer.allow_https_to(peer, f"{service} (the action)")


def producer_timeout_seconds(policy: Policy) -> int:
    """The producer's budget plus room to finish the page in hand, within Lambda's limit."""
    wanted = math.ceil(policy.producer_budget_seconds) + PRODUCER_TIMEOUT_MARGIN_SECONDS
    return min(wanted, LAMBDA_MAX_TIMEOUT_SECONDS)
