"""Database: Aurora Serverless v2 PostgreSQL with TLS and a managed secret, optional RDS Proxy,
or an imported cluster; port 5432 open to sweeper's function security groups only."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Match

from infra.database import ADMIN_USERNAME, APP_USERNAME, DATABASE_NAME, READER_USERNAME
from tests.infra.conftest import IMPORTED_CONTEXT, Synth

RUNTIME_FUNCTIONS = ("Producer", "Consumer", "Redrive")
#: What tells a function its ledger's cluster may pause (sweeper.config.Settings).
MAY_PAUSE = "SWEEPER_LEDGER_MAY_PAUSE"


@pytest.fixture(params=["default", "proxied"])
def every_new_cluster(request: pytest.FixtureRequest) -> Synth:
    variant: Synth = request.getfixturevalue(request.param)
    return variant


def test_cluster_is_aurora_serverless_v2_postgresql_encrypted_and_protected(
    default: Synth,
) -> None:
    cluster = default.resource("DatabaseCluster", "AWS::RDS::DBCluster")
    props = cluster["Properties"]
    assert props["Engine"] == "aurora-postgresql"
    assert props["StorageEncrypted"] is True
    # Protected, but not here: switched on as the deploy's last step (test_first_deploy.py).
    assert "DeletionProtection" not in props
    assert props["DatabaseName"] == DATABASE_NAME
    assert props["ServerlessV2ScalingConfiguration"] == {"MinCapacity": 0.5, "MaxCapacity": 4}
    assert cluster["DeletionPolicy"] == "Snapshot"
    default.template.has_resource_properties(
        "AWS::RDS::DBInstance", {"DBInstanceClass": "db.serverless", "PubliclyAccessible": False}
    )


def test_server_refuses_connections_without_tls(default: Synth) -> None:
    default.template.has_resource_properties(
        "AWS::RDS::DBClusterParameterGroup", {"Parameters": {"rds.force_ssl": "1"}}
    )


def test_secret_holds_the_database_name_and_is_rotated(default: Synth) -> None:
    secret = default.resource("DatabaseSecret", "AWS::SecretsManager::Secret")
    template = json.loads(secret["Properties"]["GenerateSecretString"]["SecretStringTemplate"])
    assert template == {"username": ADMIN_USERNAME, "dbname": DATABASE_NAME}
    default.template.has_resource_properties(
        "AWS::SecretsManager::RotationSchedule",
        {
            "RotationRules": {"ScheduleExpression": "rate(30 days)"},
            "RotateImmediatelyOnUpdate": False,
        },
    )


def _ingress_into(synth: Synth, group_ref: Any) -> list[dict[str, Any]]:
    return [
        rule["Properties"]
        for rule in synth.resources("AWS::EC2::SecurityGroupIngress").values()
        if rule["Properties"]["GroupId"] == group_ref
    ]


def _ledger_functions(synth: Synth) -> dict[str, dict[str, Any]]:
    """sweeper's functions that reach the ledger: all but the webhook, which only enqueues."""
    return {
        logical_id: function
        for logical_id, function in synth.python_functions().items()
        if function["Properties"]["Environment"]["Variables"].get("SWEEPER_NEEDS_DATABASE")
        != "false"
    }


def test_database_admits_postgres_from_function_security_groups_only(default: Synth) -> None:
    group_id = default.logical_id("Database/SecurityGroup/Resource")
    group = default.template_json["Resources"][group_id]["Properties"]
    assert "SecurityGroupIngress" not in group  # no inline (CIDR) rules
    rules = _ingress_into(default, {"Fn::GetAtt": [group_id, "GroupId"]})
    sources = {rule["SourceSecurityGroupId"]["Fn::GetAtt"][0] for rule in rules}
    function_groups = {
        sg_id
        for function in _ledger_functions(default).values()
        for sg_id in (
            ref["Fn::GetAtt"][0] for ref in function["Properties"]["VpcConfig"]["SecurityGroupIds"]
        )
    }
    rotation_groups = {
        default.logical_id("Cluster/RotationSingleUser/SecurityGroup/Resource"),
        default.logical_id("Cluster/AppSecretRotation/SecurityGroup/Resource"),
        default.logical_id("Cluster/ReaderSecretRotation/SecurityGroup/Resource"),
    }
    assert sources == function_groups | rotation_groups
    cluster_id = default.logical_id("Database/Cluster/Resource")
    assert default.template_json["Resources"][cluster_id]["Properties"]["Port"] == 5432
    cluster_port = {"Fn::GetAtt": [cluster_id, "Endpoint.Port"]}  # how CDK wires the rotation
    assert all(rule["FromPort"] == rule["ToPort"] in (5432, cluster_port) for rule in rules)


def test_functions_read_the_secret_arn_never_the_password(default: Synth) -> None:
    for logical_id, function in _ledger_functions(default).items():
        variables = function["Properties"]["Environment"]["Variables"]
        assert "SWEEPER_DATABASE_SECRET_ARN" in variables, logical_id
        rendered = json.dumps(variables)
        assert "resolve:secretsmanager" not in rendered
        assert "PASSWORD" not in rendered.upper()


def test_without_proxy_functions_use_the_host_in_the_secret(default: Synth) -> None:
    for name in RUNTIME_FUNCTIONS:
        variables = default.environment(name)
        assert "SWEEPER_DATABASE_HOST" not in variables
        assert "SWEEPER_DATABASE_PREPARE" not in variables


def test_proxy_requires_tls_and_functions_skip_prepared_statements(proxied: Synth) -> None:
    proxied.template.has_resource_properties(
        "AWS::RDS::DBProxy", {"RequireTLS": True, "EngineFamily": "POSTGRESQL"}
    )
    proxy_id = proxied.logical_id("Database/Proxy/Resource")
    for name in RUNTIME_FUNCTIONS:
        for logical_id, function in proxied.python_functions().items():
            if name not in logical_id:
                continue
            variables = function["Properties"]["Environment"]["Variables"]
            assert variables["SWEEPER_DATABASE_PREPARE"] == "off"
            assert variables["SWEEPER_DATABASE_HOST"] == {"Fn::GetAtt": [proxy_id, "Endpoint"]}


def test_migrations_bypass_the_proxy(proxied: Synth) -> None:
    variables = proxied.environment("MigrationsFunction")
    assert "SWEEPER_DATABASE_HOST" not in variables
    assert "SWEEPER_DATABASE_PREPARE" not in variables


def test_cluster_behind_a_proxy_admits_the_proxy(proxied: Synth) -> None:
    cluster_group = proxied.logical_id("Database/SecurityGroup/Resource")
    proxy_group = proxied.logical_id("Database/ProxySecurityGroup/Resource")
    rules = _ingress_into(proxied, {"Fn::GetAtt": [cluster_group, "GroupId"]})
    assert {"Fn::GetAtt": [proxy_group, "GroupId"]} in [r["SourceSecurityGroupId"] for r in rules]


def test_scale_to_zero_pauses_the_cluster(proxied: Synth) -> None:
    proxied.template.has_resource_properties(
        "AWS::RDS::DBCluster",
        {
            "ServerlessV2ScalingConfiguration": {
                "MinCapacity": 0,
                "MaxCapacity": 4,
                "SecondsUntilAutoPause": Match.any_value(),
            }
        },
    )


def test_a_cluster_that_may_pause_has_every_function_close_its_session_after_a_run(
    paused_lean: Synth, default: Synth, proxied: Synth
) -> None:
    # Given a new cluster at minimum 0 ACU without a proxy: it pauses after 300 s (Aurora's
    # floor) with no user connection
    paused_lean.template.has_resource_properties(
        "AWS::RDS::DBCluster",
        {"ServerlessV2ScalingConfiguration": Match.object_like({"SecondsUntilAutoPause": 300})},
    )
    # Then every function that connects at run time is told to close its session at run end
    runtime = _runtime_functions(paused_lean)
    assert len(runtime) >= 6
    assert all(variables.get(MAY_PAUSE) == "1" for variables in runtime.values())
    # And none is where the cluster keeps a minimum, or a proxy holds the connections anyway
    for synth in (default, proxied):
        assert not any(MAY_PAUSE in variables for variables in _runtime_functions(synth).values())


def _runtime_functions(synth: Synth) -> dict[str, dict[str, Any]]:
    """The ledger functions' environments, but the migrations' (run once at a deploy)."""
    return {
        logical_id: function["Properties"]["Environment"]["Variables"]
        for logical_id, function in _ledger_functions(synth).items()
        if "Migration" not in logical_id
    }


def test_imported_database_is_reached_at_the_given_endpoint(imported: Synth) -> None:
    imported.template.resource_count_is("AWS::RDS::DBCluster", 0)
    imported.template.resource_count_is("AWS::RDS::DBProxy", 0)
    for name in (*RUNTIME_FUNCTIONS, "MigrationsFunction"):
        variables = imported.environment(name)
        assert variables["SWEEPER_DATABASE_SECRET_ARN"] == IMPORTED_CONTEXT["database_secret_arn"]
        assert variables["SWEEPER_DATABASE_HOST"] == IMPORTED_CONTEXT["database_endpoint"]
        assert variables["SWEEPER_DATABASE_PORT"] == IMPORTED_CONTEXT["database_port"]
    # rds_proxy=true with an imported endpoint: that endpoint is a proxy.
    assert imported.environment("Consumer")["SWEEPER_DATABASE_PREPARE"] == "off"


def test_imported_database_group_admits_each_function_on_its_port(imported: Synth) -> None:
    rules = _ingress_into(imported, IMPORTED_CONTEXT["database_security_group_id"])
    assert len(rules) == len(_ledger_functions(imported))
    port = int(IMPORTED_CONTEXT["database_port"])
    assert all(rule["FromPort"] == rule["ToPort"] == port for rule in rules)
    assert all("SourceSecurityGroupId" in rule for rule in rules)


def _secret_reads(synth: Synth, function: dict[str, Any]) -> set[str]:
    """The logical IDs of the secrets (or their attachments) the function's role may read."""
    role = function["Properties"]["Role"]["Fn::GetAtt"][0]
    secrets = set(synth.resources("AWS::SecretsManager::Secret")) | set(
        synth.resources("AWS::SecretsManager::SecretTargetAttachment")
    )
    read: set[str] = set()
    for policy in synth.resources("AWS::IAM::Policy").values():
        if {"Ref": role} not in policy["Properties"]["Roles"]:
            continue
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = statement["Action"]
            if "secretsmanager:GetSecretValue" not in (
                actions if isinstance(actions, list) else [actions]
            ):
                continue
            rendered = json.dumps(statement["Resource"])
            read |= {secret for secret in secrets if f'"{secret}"' in rendered}
    return read


def test_only_the_migrations_read_the_master_secret(every_new_cluster: Synth) -> None:
    synth = every_new_cluster
    master = synth.logical_id("Database/Secret/Resource")
    master_attachment = synth.logical_id("Database/Secret/Attachment/Resource")
    app_attachment = synth.logical_id("Database/AppSecret/Attachment/Resource")
    reader_attachment = synth.logical_id("Database/ReaderSecret/Attachment/Resource")
    credentials = {master, master_attachment, app_attachment, reader_attachment}
    for logical_id, function in synth.python_functions().items():
        variables = function["Properties"]["Environment"]["Variables"]
        reads = _secret_reads(synth, function)
        if logical_id not in _ledger_functions(synth):
            # The webhook: no database credential of any kind, only its own signing secret.
            assert "SWEEPER_DATABASE_SECRET_ARN" not in variables, logical_id
            assert not reads & credentials, logical_id
            continue
        if logical_id.startswith("Migrations"):
            # The migrations connect as the master user and create both login users.
            assert variables["SWEEPER_DATABASE_SECRET_ARN"] == {"Ref": master_attachment}
            assert variables["SWEEPER_APP_SECRET_ARN"] == {"Ref": app_attachment}
            assert variables["SWEEPER_READER_SECRET_ARN"] == {"Ref": reader_attachment}
            assert reads == {master_attachment, app_attachment, reader_attachment}
            continue
        assert logical_id.startswith(
            ("Pipeline", "Redrive", "Retention", "Discovery", "Intake", "OperatorApi")
        ), logical_id
        assert "SWEEPER_APP_SECRET_ARN" not in variables
        assert "SWEEPER_READER_SECRET_ARN" not in variables
        assert master not in json.dumps(variables)
        # The read-only operator function reads as the reader; every other as the application.
        mine = reader_attachment if logical_id.startswith("OperatorApiReadOnly") else app_attachment
        assert variables["SWEEPER_DATABASE_SECRET_ARN"] == {"Ref": mine}, logical_id
        assert reads == {mine}, logical_id


@pytest.mark.parametrize(
    ("construct", "username"), [("AppSecret", APP_USERNAME), ("ReaderSecret", READER_USERNAME)]
)
def test_each_login_secret_is_its_own_user_rotated_with_the_master(
    default: Synth, construct: str, username: str
) -> None:
    secret = default.resource(f"Database{construct}", "AWS::SecretsManager::Secret")
    # A join: the master secret's ARN is only known at deploy time.
    parts = secret["Properties"]["GenerateSecretString"]["SecretStringTemplate"]["Fn::Join"][1]
    master_attachment = default.logical_id("Database/Secret/Attachment/Resource")
    assert parts[1] == {"Ref": master_attachment}
    template = json.loads(f"{parts[0]}MASTER{parts[2]}")
    assert template == {"username": username, "dbname": DATABASE_NAME, "masterarn": "MASTER"}
    assert len({ADMIN_USERNAME, APP_USERNAME, READER_USERNAME}) == 3
    attachment = default.logical_id(f"Database/{construct}/Attachment/Resource")
    schedules = [
        props["Properties"]
        for props in default.resources("AWS::SecretsManager::RotationSchedule").values()
        if props["Properties"]["SecretId"] == {"Ref": attachment}
    ]
    assert len(schedules) == 1
    assert schedules[0]["RotationRules"] == {"ScheduleExpression": "rate(30 days)"}
    assert schedules[0]["RotateImmediatelyOnUpdate"] is False
    # Rotated by AWS's multi-user PostgreSQL rotation application (it logs in as the master).
    application = schedules[0]["RotationLambdaARN"]["Fn::GetAtt"][0]
    location = default.template_json["Resources"][application]["Properties"]["Location"]
    mapping = location["ApplicationId"]["Fn::FindInMap"][0]
    assert "PostgreSQLRotationMultiUser" in json.dumps(default.template_json["Mappings"][mapping])


def test_the_proxy_admits_the_application_and_reader_users_only(proxied: Synth) -> None:
    (proxy,) = proxied.resources("AWS::RDS::DBProxy").values()
    app_attachment = proxied.logical_id("Database/AppSecret/Attachment/Resource")
    reader_attachment = proxied.logical_id("Database/ReaderSecret/Attachment/Resource")
    assert [auth["SecretArn"] for auth in proxy["Properties"]["Auth"]] == [
        {"Ref": app_attachment},
        {"Ref": reader_attachment},
    ]


def test_the_shared_layer_ships_the_rds_ca_bundle(default: Synth) -> None:
    staged = list(default.outdir.glob("asset.*/python/sweeper/ledger/certs/rds-ca-bundle.pem"))
    assert len(staged) == 1
    assert staged[0].read_text(encoding="ascii").count("BEGIN CERTIFICATE") > 0
