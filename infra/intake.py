"""One policy's intake: hints in through a signed webhook and EventBridge rules, into the ledger.

webhook (function URL) ─┐
intake bus rules ───────┼─> intake queue (+ DLQ) ─> intake function ─> ledger (upsert)
`sweeper schedule --stack`┘

The webhook function never reaches the database: it verifies, records the signature in its
replay table and puts the hints on the intake queue; 202 means they are there. The intake
function is the only writer, with a partial batch response (docs/decisions.md, "Intake").

The queue admits `sqs:SendMessage` from these three only: the webhook's role, the intake sender
role (infra/intake_sender.py, for `schedule --stack`) and EventBridge delivering for this
policy's own rules. Everything else, in this account too, meets an explicit Deny. The rules
listen on the stack's intake bus (infra/intake_bus.py), not the default bus: only the
principals its policy lists may put events there.
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from infra.function import SweeperFunction, policy_json
from infra.intake_sender import IntakeSender
from infra.ledger_function import LedgerAccess, LedgerFunction
from infra.nag import acknowledge
from infra.naming import deployment_name
from infra.network import Network
from infra.packaging import Packaging
from infra.queues import admit_only, queue_with_dead_letters
from sweeper.config import Policy
from sweeper.intake.replay import REPLAY_PARTITION_KEY, REPLAY_TTL_ATTRIBUTE

INTAKE_MEMORY_MB = 512
WEBHOOK_MEMORY_MB = 512
#: The webhook answers within seconds or not at all: a sender retries a timeout.
WEBHOOK_TIMEOUT_SECONDS = 10
WEBHOOK_SECRET_LENGTH = 64
#: What the webhook does to its replay table, and nothing more (no Scan, no Query).
REPLAY_ACTIONS = (
    "dynamodb:GetItem",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
)

WEBHOOK_PUBLIC_REASON = (
    "The webhook is called by vendors and internal systems without AWS credentials; each "
    "request is authenticated by its HMAC-SHA256 signature (a per-policy secret), refused when "
    "stale or replayed, and bounded by the function's reserved concurrency (docs/decisions.md)."
)
SIGNING_KEY_ROTATION_REASON = (
    "The signing secret is shared with the senders out of band; rotating it is a coordinated "
    "change with each of them (docs/runbook.md, 'Rotating the webhook secret'), not a schedule."
)


class Intake(Construct):
    """Intake queue and DLQ, the intake function, EventBridge rules, the webhook and its secret."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        policy: Policy,
        ledger: LedgerAccess,
        sender: IntakeSender,
        bus: events.IEventBus | None = None,
    ) -> None:
        """`bus`: the stack's intake bus (infra/intake_bus.py), where the policy's rules
        listen; needed when the policy has `event_patterns`."""
        super().__init__(scope, construct_id)
        self.policy = policy
        config = policy.intake
        policy_text = policy_json(policy)

        self.queue, self.dead_letter_queue = queue_with_dead_letters(
            self,
            queue_id="Queue",
            queue_arn_id="IntakeQueueArn",
            queue_name=f"{deployment_name(self)}-{policy.name}-intake",
            visibility_seconds=config.visibility_timeout_seconds,
            max_receive_count=config.max_receive_count,
        )

        self.function = LedgerFunction(
            self,
            "Function",
            policy=policy,
            ledger=ledger,
            aws_apis="SQS and Secrets Manager",
            code_name="intake",
            description=f"{policy.name} intake: upserts hints from the intake queue",
            timeout_seconds=config.timeout_seconds,
            memory_mb=INTAKE_MEMORY_MB,
            reserved_concurrency=config.reserved_concurrency,
            # Records that met an unreachable ledger return soon: ChangeMessageVisibility on this
            # queue (granted with the event source below).
            environment={"SWEEPER_INTAKE_QUEUE_URL": self.queue.queue_url},
        )
        self.function.function.add_event_source(
            event_sources.SqsEventSource(
                self.queue,
                batch_size=config.batch_size,
                report_batch_item_failures=True,
                max_concurrency=max(2, config.reserved_concurrency),
            )
        )

        self.rules: list[events.Rule] = []
        if config.event_patterns and bus is None:
            raise ValueError(f"policy {policy.name} has event patterns but no intake bus")
        for index, pattern in enumerate(config.event_patterns):
            rule = events.Rule(
                self,
                f"Rule{index}",
                description=f"sweeper {policy.name}: events that are hints",
                event_bus=bus,
                event_pattern=_event_pattern(pattern),
            )
            rule.add_target(targets.SqsQueue(self.queue))
            self.rules.append(rule)

        self.webhook: SweeperFunction | None = None
        self.webhook_url: lambda_.FunctionUrl | None = None
        self.secret: secretsmanager.Secret | None = None
        self.replay_table: dynamodb.Table | None = None
        if config.webhook:
            self._webhook(policy, ledger.network, ledger.packaging, policy_text)

        sender.grant_intake(self.queue, self.dead_letter_queue)
        senders = [sender.role] + ([self.webhook.role] if self.webhook is not None else [])
        # EventBridge may deliver for this policy's own rules only (a rule of another policy or
        # account has another ARN); no rules: no service at all.
        admit_only(self.queue, senders, service_sources=[rule.rule_arn for rule in self.rules])

    def _webhook(
        self, policy: Policy, network: Network, packaging: Packaging, policy_json: str
    ) -> None:
        config = policy.intake
        self.secret = secretsmanager.Secret(
            self,
            "WebhookSecret",
            description=f"sweeper {policy.name}: webhook signing secret (HMAC-SHA256)",
            generate_secret_string=secretsmanager.SecretStringGenerator(
                password_length=WEBHOOK_SECRET_LENGTH, exclude_punctuation=True
            ),
        )
        acknowledge(self.secret, "AwsSolutions-SMG4", SIGNING_KEY_ROTATION_REASON)
        self.replay_table = dynamodb.Table(
            self,
            "ReplayTable",
            partition_key=dynamodb.Attribute(
                name=REPLAY_PARTITION_KEY, type=dynamodb.AttributeType.STRING
            ),
            time_to_live_attribute=REPLAY_TTL_ATTRIBUTE,
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            # Markers live minutes: a redeploy starts without them, and stale signatures are
            # refused by their timestamp anyway.
            removal_policy=RemovalPolicy.DESTROY,
        )
        self.webhook = SweeperFunction(
            self,
            "Webhook",
            code_name="webhook",
            description=f"{policy.name} webhook: signed hints onto the intake queue",
            packaging=packaging,
            network=network,
            environment={
                "SWEEPER_POLICY": policy_json,
                "SWEEPER_INTAKE_QUEUE_URL": self.queue.queue_url,
                "SWEEPER_REPLAY_TABLE": self.replay_table.table_name,
                "SWEEPER_WEBHOOK_SECRET_ARN": self.secret.secret_arn,
                "SWEEPER_NEEDS_DATABASE": "false",
            },
            timeout_seconds=WEBHOOK_TIMEOUT_SECONDS,
            memory_mb=WEBHOOK_MEMORY_MB,
            reserved_concurrency=config.webhook_reserved_concurrency,
        )
        self.queue.grant_send_messages(self.webhook.role)
        self.queue.grant(self.webhook.role, "sqs:GetQueueAttributes")
        self.replay_table.grant(self.webhook.role, *REPLAY_ACTIONS)
        self.secret.grant_read(self.webhook.role)
        # HTTPS to anywhere covers DynamoDB's gateway endpoint (a public prefix list) and the
        # SQS and Secrets Manager interface endpoints.
        self.webhook.allow_https_to(network.aws_api_peer, "SQS and Secrets Manager")
        self.webhook.allow_https_to(network.dynamodb_peer, "DynamoDB (gateway endpoint)")
        self.webhook_url = self.webhook.function.add_function_url(
            auth_type=lambda_.FunctionUrlAuthType.NONE,
            invoke_mode=lambda_.InvokeMode.BUFFERED,
        )


def _event_pattern(pattern: dict[str, object]) -> events.EventPattern:
    """A pattern from the policy file (EventBridge's JSON keys) as CDK's EventPattern."""
    names = {
        "source": "source",
        "detail-type": "detail_type",
        "detail": "detail",
        "account": "account",
        "region": "region",
        "resources": "resources",
        "id": "id",
        "time": "time",
        "version": "version",
    }
    unknown = sorted(set(pattern) - set(names))
    if unknown:
        raise ValueError(f"event pattern keys not supported: {unknown}")
    return events.EventPattern(**{names[k]: v for k, v in pattern.items()})  # type: ignore[arg-type]
