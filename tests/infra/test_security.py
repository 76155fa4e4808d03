"""Security: one least-privilege role per function, encryption at rest, TLS, no plain secrets."""

from __future__ import annotations

import json
from typing import Any

from infra.function import VPC_ACCESS_ACTIONS
from infra.network import VPC_CIDR
from infra.tables import IDEMPOTENCY_ACTIONS, LIMITER_ACTIONS, WAKE_ACTIONS
from sweeper.config import HttpActionConfig
from sweeper.ledger.wake import wake_key
from sweeper.limiter.keys import CLOSURES_KEY
from tests.infra.conftest import Synth

XRAY_ACTIONS = {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _statements_of_role(synth: Synth, role_id: str) -> list[dict[str, Any]]:
    statements: list[dict[str, Any]] = []
    for policy in synth.resources("AWS::IAM::Policy").values():
        if {"Ref": role_id} in policy["Properties"]["Roles"]:
            statements += policy["Properties"]["PolicyDocument"]["Statement"]
    role = synth.template_json["Resources"][role_id]["Properties"]
    for inline in role.get("Policies", []):
        statements += inline["PolicyDocument"]["Statement"]
    return statements


def _role_of(function: dict[str, Any]) -> str:
    return str(function["Properties"]["Role"]["Fn::GetAtt"][0])


def _actions(statements: list[dict[str, Any]]) -> set[str]:
    return {action for s in statements for action in _as_list(s["Action"])}


def _function_statements(synth: Synth, pattern: str) -> list[dict[str, Any]]:
    return _statements_of_role(synth, _role_of(synth.function(pattern)))


def test_each_function_has_its_own_role_without_managed_policies(every_variant: Synth) -> None:
    functions = every_variant.python_functions().values()
    roles = [_role_of(function) for function in functions]
    assert len(set(roles)) == len(roles)
    for role_id in roles:
        role = every_variant.template_json["Resources"][role_id]["Properties"]
        assert "ManagedPolicyArns" not in role


def test_wildcard_resources_only_for_network_interfaces_and_tracing(every_variant: Synth) -> None:
    allowed = set(VPC_ACCESS_ACTIONS) | XRAY_ACTIONS
    # The operator API lists a consumer's event source mappings to pause it: no resource-level
    # permission exists for that read (the update is bound to the consumers' ARNs).
    operator_role = _role_of(every_variant.function("OperatorApiOperatorFunction"))
    for function in every_variant.python_functions().values():
        role = _role_of(function)
        extra = {"lambda:ListEventSourceMappings"} if role == operator_role else set()
        for statement in _statements_of_role(every_variant, role):
            if "*" in _as_list(statement["Resource"]):
                assert set(_as_list(statement["Action"])) <= allowed | extra, statement


def test_a_passthrough_consumer_may_still_write_traces_once_an_operator_turns_them_on(
    default: Synth,
) -> None:
    # Given the shipped policy's consumer, its tracing passthrough (consumer.tracing)
    consumer = default.function(r"^Pipeline\w*ConsumerFunction[0-9A-F]{8}$")
    assert consumer["Properties"]["TracingConfig"] == {"Mode": "PassThrough"}
    # Then its role may still write to X-Ray, so that `aws lambda update-function-configuration
    # --tracing-config Mode=Active` traces it at once, without a deploy (docs/runbook.md)
    assert _actions(_statements_of_role(default, _role_of(consumer))) >= XRAY_ACTIONS


def test_no_statement_grants_a_whole_service(every_variant: Synth) -> None:
    for policy in every_variant.resources("AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            for action in _as_list(statement["Action"]):
                assert action != "*"
                assert not action.endswith(":*"), action


def test_consumer_reads_its_queue_and_writes_only_its_tables(proxied: Synth) -> None:
    dynamodb_allowed = set(IDEMPOTENCY_ACTIONS) | set(LIMITER_ACTIONS)
    tables = {
        proxied.logical_id("Tables/Idempotency/Resource"),
        proxied.logical_id("Tables/Limiter/Resource"),
    }
    for policy in proxied.config.policies:
        prefix = f"Pipeline{policy.name.replace('-', '')}"
        statements = _function_statements(proxied, f"^{prefix}ConsumerFunction[0-9A-F]{{8}}$")
        actions = _actions(statements)
        assert "sqs:SendMessage" not in actions
        assert {a for a in actions if a.startswith("dynamodb:")} <= dynamodb_allowed
        own_queue = proxied.logical_id(f"Pipeline-{policy.name}/WorkQueue/Resource")
        for statement in statements:
            rendered = json.dumps(statement["Resource"])
            if any(a.startswith("sqs:") for a in _as_list(statement["Action"])):
                assert own_queue in rendered
                assert "DeadLetterQueue" not in rendered
            if any(a.startswith("dynamodb:") for a in _as_list(statement["Action"])):
                assert any(table in rendered for table in tables)


def test_consumer_may_shorten_the_visibility_of_its_own_queue_messages(proxied: Synth) -> None:
    # A record that met an unreachable ledger, or waits for a slot, goes back to the work queue
    # with its visibility changed (ChangeMessageVisibility and its Batch form, one permission).
    for policy in proxied.config.policies:
        prefix = f"Pipeline{policy.name.replace('-', '')}"
        statements = _function_statements(proxied, f"^{prefix}ConsumerFunction[0-9A-F]{{8}}$")
        own_queue = proxied.logical_id(f"Pipeline-{policy.name}/WorkQueue/Resource")
        granting = [
            s
            for s in statements
            if "sqs:ChangeMessageVisibility" in _as_list(s["Action"])
            and own_queue in json.dumps(s["Resource"])
        ]
        assert granting, f"{policy.name}: no sqs:ChangeMessageVisibility on its work queue"


def test_producer_only_sends_to_its_own_queue(proxied: Synth) -> None:
    for policy in proxied.config.policies:
        prefix = f"Pipeline{policy.name.replace('-', '')}"
        statements = _function_statements(proxied, f"^{prefix}ProducerFunction[0-9A-F]{{8}}$")
        actions = _actions(statements)
        # DynamoDB: only listing the closed gates (see the producer's scan test below), and
        # its policy's wake item
        assert {a for a in actions if a.startswith("dynamodb:")} == {"dynamodb:Scan", *WAKE_ACTIONS}
        _only_the_wake_item_is_written(statements, policy.name)
        assert "sqs:ReceiveMessage" not in actions
        own_queue = proxied.logical_id(f"Pipeline-{policy.name}/WorkQueue/Resource")
        dlq = proxied.logical_id(
            f"Pipeline-{policy.name}/ProducerSchedule/DeadLetterQueue/Resource"
        )
        for statement in statements:
            if "sqs:SendMessage" in _as_list(statement["Action"]):
                rendered = json.dumps(statement["Resource"])
                # its work queue, and its schedule DLQ as the async failure destination
                assert own_queue in rendered or dlq in rendered


def test_api_token_is_readable_by_its_policy_consumer_only(proxied: Synth) -> None:
    (with_token,) = [
        p
        for p in proxied.config.policies
        if isinstance(p.action, HttpActionConfig) and p.action.auth_secret_arn
    ]
    assert isinstance(with_token.action, HttpActionConfig)
    token_arn = with_token.action.auth_secret_arn
    assert token_arn is not None
    for logical_id, function in proxied.python_functions().items():
        statements = _statements_of_role(proxied, _role_of(function))
        reads_token = token_arn in json.dumps(statements)
        is_its_consumer = logical_id.startswith("PipelinestalesessionsConsumer")
        assert reads_token == is_its_consumer, logical_id


def test_secrets_reach_functions_by_arn_only(every_variant: Synth) -> None:
    for function in every_variant.python_functions().values():
        variables = function["Properties"]["Environment"]["Variables"]
        rendered = json.dumps(variables)
        assert "resolve:secretsmanager" not in rendered
        for name in variables:
            assert "PASSWORD" not in name
            assert "TOKEN" not in name
            assert "SECRET" not in name or name.endswith("_SECRET_ARN")


def test_producer_egress_is_https_to_endpoints_dynamodb_and_postgres(default: Synth) -> None:
    group_id = default.logical_id("Pipeline-exports/Producer/SecurityGroup/Resource")
    inline = default.template_json["Resources"][group_id]["Properties"]["SecurityGroupEgress"]
    assert [(rule["CidrIp"], rule["FromPort"]) for rule in inline] == [(VPC_CIDR, 443)]
    separate = [
        rule["Properties"]
        for rule in default.resources("AWS::EC2::SecurityGroupEgress").values()
        if rule["Properties"]["GroupId"] == {"Fn::GetAtt": [group_id, "GroupId"]}
    ]
    # PostgreSQL to the database's group; HTTPS to DynamoDB's prefix list (the closed gates)
    assert sorted(
        (rule["FromPort"], "DestinationSecurityGroupId" in rule, "DestinationPrefixListId" in rule)
        for rule in separate
    ) == [(443, False, True), (5432, True, False)]


def test_consumer_egress_reaches_the_vendor_port(proxied: Synth) -> None:
    group_id = proxied.logical_id("Pipeline-stale-sessions/Consumer/SecurityGroup/Resource")
    inline = proxied.template_json["Resources"][group_id]["Properties"]["SecurityGroupEgress"]
    assert sorted(rule["FromPort"] for rule in inline) == [443, 8443]
    assert {rule["CidrIp"] for rule in inline} == {"0.0.0.0/0"}


def test_everything_is_encrypted_at_rest(every_variant: Synth) -> None:
    for queue in every_variant.resources("AWS::SQS::Queue").values():
        assert queue["Properties"]["SqsManagedSseEnabled"] is True
    for table in every_variant.resources("AWS::DynamoDB::Table").values():
        assert table["Properties"]["SSESpecification"]["SSEEnabled"] is True
    for cluster in every_variant.resources("AWS::RDS::DBCluster").values():
        assert cluster["Properties"]["StorageEncrypted"] is True
    (topic,) = every_variant.resources("AWS::SNS::Topic").values()
    assert "KmsMasterKeyId" in topic["Properties"]
    for key in every_variant.resources("AWS::KMS::Key").values():
        assert key["Properties"]["EnableKeyRotation"] is True


def test_every_queue_refuses_requests_without_tls(every_variant: Synth) -> None:
    queues = set(every_variant.resources("AWS::SQS::Queue"))
    guarded = set()
    for policy in every_variant.resources("AWS::SQS::QueuePolicy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            if statement["Effect"] == "Deny" and statement.get("Condition") == {
                "Bool": {"aws:SecureTransport": "false"}
            }:
                guarded |= {ref["Ref"] for ref in policy["Properties"]["Queues"]}
    assert guarded == queues


def test_every_log_group_expires_its_logs(every_variant: Synth) -> None:
    for log_group in every_variant.resources("AWS::Logs::LogGroup").values():
        assert log_group["Properties"]["RetentionInDays"] > 0


def test_redrive_reads_the_gate_and_moves_only_its_own_dead_letters(default: Synth) -> None:
    statements = _function_statements(default, r"^RedriveexportsFunction[0-9A-F]{8}$")
    actions = _actions(statements)
    assert {a for a in actions if a.startswith("dynamodb:")} == {"dynamodb:GetItem", *WAKE_ACTIONS}
    _only_the_wake_item_is_written(statements, "exports")
    limiter = default.logical_id("Tables/Limiter/Resource")
    dlq = default.logical_id("Pipeline-exports/DeadLetterQueue/Resource")
    work = default.logical_id("Pipeline-exports/WorkQueue/Resource")
    for statement in statements:
        rendered = json.dumps(statement["Resource"])
        statement_actions = set(_as_list(statement["Action"]))
        if "dynamodb:GetItem" in statement_actions:
            assert limiter in rendered
        if "sqs:ReceiveMessage" in statement_actions:
            assert dlq in rendered
        if statement_actions & {"sqs:SendMessage"} and "Schedule" not in rendered:
            assert work in rendered


def test_the_producer_may_only_scan_the_limiter_for_closed_gates(default: Synth) -> None:
    statements = _function_statements(default, r"^PipelineexportsProducerFunction[0-9A-F]{8}$")
    dynamodb = {a for a in _actions(statements) if a.startswith("dynamodb:")}
    assert dynamodb == {"dynamodb:Scan", *WAKE_ACTIONS}
    _only_the_wake_item_is_written(statements, "exports")
    limiter = default.logical_id("Tables/Limiter/Resource")
    for statement in statements:
        if "dynamodb:Scan" in set(_as_list(statement["Action"])):
            assert limiter in json.dumps(statement["Resource"])
    # It reads the latest closure's end before it Scans (sweeper.limiter.closures), and its
    # wake item: GetItem on those two items only
    read_keys = sorted(
        key
        for statement in statements
        if "dynamodb:GetItem" in _as_list(statement["Action"])
        for key in _as_list(
            statement["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"]
        )
    )
    assert read_keys == sorted([CLOSURES_KEY, wake_key("exports")])
    variables = default.environment(r"^PipelineexportsProducerFunction[0-9A-F]{8}$")
    assert variables["SWEEPER_LIMITER_TABLE"] == {"Ref": limiter}


def _only_the_wake_item_is_written(statements: list[dict[str, Any]], *policies: str) -> None:
    """Every DynamoDB write of a function that is no consumer: its policies' wake items."""
    for statement in statements:
        if "dynamodb:UpdateItem" in _as_list(statement["Action"]):
            keys = statement["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"]
            assert sorted(_as_list(keys)) == sorted(wake_key(p) for p in policies)


def test_no_deployed_function_may_run_a_baseline_limiter(every_variant: Synth) -> None:
    """No deployed function carries the local-stack flag (a rehearsal's gate) or a bench knob."""
    for logical_id, function in every_variant.python_functions().items():
        variables = function["Properties"]["Environment"]["Variables"]
        assert "SWEEPER_LOCAL_STACK" not in variables, logical_id
        assert "SWEEPER_LIMITER_MODE" not in variables, logical_id
        assert "SWEEPER_REHEARSAL_URL" not in variables, logical_id  # the local stack's only
