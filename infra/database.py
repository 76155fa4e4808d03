"""Database: the ledger on Aurora Serverless v2 PostgreSQL, or an existing cluster imported.

New cluster: writer only, storage encrypted, TLS forced by the server (`rds.force_ssl`), the
admin credential in a generated Secrets Manager secret (host, port, dbname, username, password)
rotated every 30 days, a snapshot when the stack is deleted. Deletion protection is switched on
by infra/protection.py as the deploy's last step, not on the cluster resource itself.

Three credentials, least privilege: the admin (master) secret is read by the migrations function
only. The producer, consumer, redrive and operator function connect as the application user, a
member of the `sweeper_app` role (DML on sweeper's tables, no DDL; migration 0004); the read-only
operator function as the reader user, a member of `sweeper_reader` (SELECT on what its reads
read; migration 0014). Each user's password lives in its own generated secret. The migrations
function creates both users from their secrets; a multi-user rotation (with the master secret)
then alternates each with a clone every 30 days, so the password a function holds stays valid
while the other one changes.

Optional RDS Proxy in front of it, which pools connections from many concurrent consumers. Two
consequences: the functions must not use server-side prepared statements (they get
`SWEEPER_DATABASE_PREPARE=off`, because the proxy would pin every session that prepares), and
the proxy's own connections keep a cluster with minimum capacity 0 from ever auto-pausing.
Migrations always connect to the cluster directly: DDL under an advisory lock pins anyway.

Imported cluster: endpoint, port, secret ARN and security group; the secret must hold at least
username and password (host and port may be absent, the endpoint given here wins). Every function
uses that one secret (sweeper cannot create a user on a cluster whose admin it does not hold),
the read-only operator function included: its reads stay read-only by its code alone there.
"""

from __future__ import annotations

from aws_cdk import Annotations, Duration, RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from aws_cdk import aws_rds as rds
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct, DependencyGroup

from infra.function import SweeperFunction
from infra.nag import acknowledge
from infra.network import Network
from infra.options import DATABASE_PORT, DeploymentOptions

AURORA_ENGINE_VERSION = rds.AuroraPostgresEngineVersion.VER_17_7
DATABASE_NAME = "sweeper"
ADMIN_USERNAME = "sweeper_admin"
#: The login user of the application secret (member of `sweeper.ledger.roles.APP_ROLE`); the
#: multi-user rotation adds `<name>_clone` and alternates between the two.
APP_USERNAME = "sweeper_app_user"
#: The login user of the reader secret (member of `sweeper.ledger.roles.READER_ROLE`: SELECT
#: only), the read-only operator function's; rotated the same way.
READER_USERNAME = "sweeper_reader_user"
BACKUP_RETENTION_DAYS = 14
SECRET_ROTATION_DAYS = 30
#: Only used when the minimum capacity is 0: Aurora pauses the instance after this long with no
#: user connection (SecondsUntilAutoPause: 300 s, its default and its floor). Every function
#: closes its session at the end of a run then (SWEEPER_LEDGER_MAY_PAUSE), and the producer
#: connects only when work can be due, so each run keeps the cluster awake this long after it;
#: a connection that comes later waits for the resume (about 15 s, Aurora's documentation).
AUTO_PAUSE_AFTER_MINUTES = 5
DATABASE_LOG_RETENTION = logs.RetentionDays.THREE_MONTHS
PROXY_IDLE_CLIENT_TIMEOUT_SECONDS = 900
PROXY_MAX_CONNECTIONS_PERCENT = 90

IAM_AUTH_REASON = (
    "Functions authenticate with the Secrets Manager credential (rotated every 30 days, read "
    "through Powertools parameters with a cache); IAM auth tokens would add a token call per "
    "connection and are rate-limited per second on new connections."
)

DELETION_PROTECTION_REASON = (
    "Deletion protection is on, but not set on the cluster resource: the DeletionProtection "
    "custom resource (infra/protection.py) switches it on after every other resource exists, "
    "so that a failed first create can still delete the cluster instead of ROLLBACK_FAILED."
)


class Database(Construct):
    """Where the ledger lives, how functions reach it, and the grants that go with it."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        network: Network,
        options: DeploymentOptions,
    ) -> None:
        super().__init__(scope, construct_id)
        #: What must be up before anything connects at deploy time (the migrations).
        self.ready = DependencyGroup()
        self.uses_proxy = options.rds_proxy
        #: A new cluster at minimum 0 ACU pauses once no user connection is open; behind RDS
        #: Proxy it never does (the proxy holds its own), and an imported one is not ours to say.
        self.may_pause = (
            not options.imports_database
            and options.database_min_capacity_acu == 0
            and not options.rds_proxy
        )
        self.port = ec2.Port.tcp(
            options.database_port if options.imports_database else DATABASE_PORT
        )
        self.cluster: rds.DatabaseCluster | None = None
        self.proxy: rds.DatabaseProxy | None = None
        #: The application user's secret (new cluster only); None: every function uses `secret`.
        self.app_secret: secretsmanager.ISecret | None = None
        #: The reader user's secret (new cluster only), the read-only operator function's.
        self.reader_secret: secretsmanager.ISecret | None = None
        #: The hosted rotations of the secrets this stack owns (none for an imported cluster).
        self.rotations: list[secretsmanager.SecretRotation] = []
        #: The most ACUs the new cluster may scale to (None for an imported cluster).
        self.max_capacity_acu: float | None = None
        # Where functions connect, unless the secret's own host and port are right.
        self._runtime_endpoint: tuple[str, str] | None = None
        self._direct_endpoint: tuple[str, str] | None = None

        if options.imports_database:
            # The options model guarantees all three together.
            assert options.database_endpoint is not None
            assert options.database_secret_arn is not None
            assert options.database_security_group_id is not None
            self.secret: secretsmanager.ISecret = secretsmanager.Secret.from_secret_complete_arn(
                self, "Secret", options.database_secret_arn
            )
            group = ec2.SecurityGroup.from_security_group_id(
                self, "SecurityGroup", options.database_security_group_id, mutable=True
            )
            self._direct = ec2.Connections(security_groups=[group])
            self._runtime = self._direct
            endpoint = (options.database_endpoint, str(options.database_port))
            self._direct_endpoint = endpoint
            self._runtime_endpoint = endpoint
            return

        cluster = self._new_cluster(network, options)
        self.cluster = cluster
        self.max_capacity_acu = options.database_max_capacity_acu
        assert cluster.secret is not None  # generated credentials always come with a secret
        self.secret = cluster.secret
        self.app_secret = self._login_secret(network, cluster, "AppSecret", APP_USERNAME)
        self.reader_secret = self._login_secret(network, cluster, "ReaderSecret", READER_USERNAME)
        self._direct = cluster.connections
        self._runtime = cluster.connections
        self.ready.add(cluster)
        if options.rds_proxy:
            if options.database_min_capacity_acu == 0:
                Annotations.of(self).add_warning_v2(
                    "sweeper:ProxyKeepsClusterAwake",
                    "RDS Proxy holds connections to the cluster, so a minimum capacity of 0 ACU "
                    "will not auto-pause it: expect at least 0.5 ACU billed around the clock",
                )
            self.proxy = self._new_proxy(network, cluster, [self.app_secret, self.reader_secret])
            self._runtime = self.proxy.connections
            self._runtime_endpoint = (self.proxy.endpoint, str(DATABASE_PORT))

    def _new_cluster(self, network: Network, options: DeploymentOptions) -> rds.DatabaseCluster:
        engine = rds.DatabaseClusterEngine.aurora_postgres(version=AURORA_ENGINE_VERSION)
        group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=network.vpc,
            allow_all_outbound=False,
            description="sweeper ledger: PostgreSQL from sweeper functions only",
        )
        parameters = rds.ParameterGroup(
            self,
            "Parameters",
            engine=engine,
            description="sweeper ledger: TLS required",
            parameters={"rds.force_ssl": "1"},
        )
        # A fixed identifier, so that the log group below can be created (with a retention)
        # before RDS would create it without one.
        identifier = f"{Stack.of(self).stack_name.lower()}-ledger"
        postgres_logs = logs.LogGroup(
            self,
            "PostgresLogs",
            log_group_name=f"/aws/rds/cluster/{identifier}/postgresql",
            retention=DATABASE_LOG_RETENTION,
            removal_policy=RemovalPolicy.DESTROY,
        )
        # The secret names the database too: RDS's attachment adds host, port and engine only.
        secret = rds.DatabaseSecret(self, "Secret", username=ADMIN_USERNAME, dbname=DATABASE_NAME)
        pauses = options.database_min_capacity_acu == 0
        cluster = rds.DatabaseCluster(
            self,
            "Cluster",
            cluster_identifier=identifier,
            engine=engine,
            credentials=rds.Credentials.from_secret(secret),
            default_database_name=DATABASE_NAME,
            writer=rds.ClusterInstance.serverless_v2(
                "Writer",
                publicly_accessible=False,
                auto_minor_version_upgrade=True,
                enable_performance_insights=True,
            ),
            serverless_v2_min_capacity=options.database_min_capacity_acu,
            serverless_v2_max_capacity=options.database_max_capacity_acu,
            serverless_v2_auto_pause_duration=(
                Duration.minutes(AUTO_PAUSE_AFTER_MINUTES) if pauses else None
            ),
            vpc=network.vpc,
            vpc_subnets=network.database_subnets,
            security_groups=[group],
            port=DATABASE_PORT,
            parameter_group=parameters,
            storage_encrypted=True,
            iam_authentication=False,
            # Never set here: infra/protection.py switches it on once everything else exists,
            # so that a failed first create can still delete the cluster.
            deletion_protection=None,
            removal_policy=RemovalPolicy.SNAPSHOT,
            backup=rds.BackupProps(retention=Duration.days(BACKUP_RETENTION_DAYS)),
            cloudwatch_logs_exports=["postgresql"],
            copy_tags_to_snapshot=True,
        )
        cluster.node.add_dependency(postgres_logs)
        # The rotation function runs in the function subnets: it needs the Secrets Manager
        # endpoint and the database, both reachable from there. No rotation at creation: the
        # migrations read the secret during the same deploy.
        rotation = cluster.add_rotation_single_user(
            automatically_after=Duration.days(SECRET_ROTATION_DAYS),
            vpc_subnets=network.function_subnets,
            endpoint=network.secrets_manager_endpoint,
            rotate_immediately_on_update=False,
        )
        self.rotations.append(rotation)
        acknowledge(cluster, "AwsSolutions-RDS6", IAM_AUTH_REASON)
        acknowledge(cluster, "AwsSolutions-RDS10", DELETION_PROTECTION_REASON)
        return cluster

    def _login_secret(
        self, network: Network, cluster: rds.DatabaseCluster, construct_id: str, username: str
    ) -> secretsmanager.ISecret:
        """A login user's generated secret, attached to the cluster and rotated."""
        assert cluster.secret is not None
        secret = rds.DatabaseSecret(
            self,
            construct_id,
            username=username,
            dbname=DATABASE_NAME,
            # Recorded as `masterarn`: what the multi-user rotation logs in with.
            master_secret=cluster.secret,
        )
        attached = secret.attach(cluster)  # adds host, port and engine
        # Same placement as the admin's rotation. No rotation at creation: the user is made by
        # the migrations during the same deploy.
        rotation = cluster.add_rotation_multi_user(
            f"{construct_id}Rotation",
            secret=attached,
            automatically_after=Duration.days(SECRET_ROTATION_DAYS),
            vpc_subnets=network.function_subnets,
            endpoint=network.secrets_manager_endpoint,
            rotate_immediately_on_update=False,
        )
        self.rotations.append(rotation)
        return attached

    def _new_proxy(
        self,
        network: Network,
        cluster: rds.DatabaseCluster,
        secrets: list[secretsmanager.ISecret],
    ) -> rds.DatabaseProxy:
        group = ec2.SecurityGroup(
            self,
            "ProxySecurityGroup",
            vpc=network.vpc,
            allow_all_outbound=False,
            description="sweeper ledger proxy: PostgreSQL from sweeper functions only",
        )
        proxy = rds.DatabaseProxy(
            self,
            "Proxy",
            proxy_target=rds.ProxyTarget.from_cluster(cluster),
            # Only the functions go through the proxy, as the application or reader user.
            secrets=secrets,
            vpc=network.vpc,
            vpc_subnets=network.database_subnets,
            security_groups=[group],
            require_tls=True,
            iam_auth=False,
            idle_client_timeout=Duration.seconds(PROXY_IDLE_CLIENT_TIMEOUT_SECONDS),
            max_connections_percent=PROXY_MAX_CONNECTIONS_PERCENT,
            debug_logging=False,
        )
        cluster.connections.allow_from(group, self.port, "sweeper ledger proxy")
        return proxy

    @property
    def runtime_secret(self) -> secretsmanager.ISecret:
        """The credential the producer, consumer and redrive connect with."""
        return self.app_secret or self.secret

    @property
    def read_only_secret(self) -> secretsmanager.ISecret:
        """The credential the read-only operator function connects with."""
        return self.reader_secret or self.secret

    def runtime_environment(self, *, read_only: bool = False) -> dict[str, str]:
        """What a function needs to connect (via the proxy if any): as the application user, or
        as the reader with `read_only`."""
        secret = self.read_only_secret if read_only else self.runtime_secret
        environment = {"SWEEPER_DATABASE_SECRET_ARN": secret.secret_arn}
        if self._runtime_endpoint is not None:
            host, port = self._runtime_endpoint
            environment |= {"SWEEPER_DATABASE_HOST": host, "SWEEPER_DATABASE_PORT": port}
        if self.uses_proxy:
            environment["SWEEPER_DATABASE_PREPARE"] = "off"
        if self.may_pause:
            # Each run closes its session: a warm environment's would keep the cluster awake.
            environment["SWEEPER_LEDGER_MAY_PAUSE"] = "1"
        return environment

    def direct_environment(self) -> dict[str, str]:
        """What the migrations need: the master secret, and the login users' to create."""
        environment = {"SWEEPER_DATABASE_SECRET_ARN": self.secret.secret_arn}
        if self.app_secret is not None:
            environment["SWEEPER_APP_SECRET_ARN"] = self.app_secret.secret_arn
        if self.reader_secret is not None:
            environment["SWEEPER_READER_SECRET_ARN"] = self.reader_secret.secret_arn
        if self._direct_endpoint is not None:
            host, port = self._direct_endpoint
            environment |= {"SWEEPER_DATABASE_HOST": host, "SWEEPER_DATABASE_PORT": port}
        return environment

    def grant_runtime_access(self, function: SweeperFunction, *, read_only: bool = False) -> None:
        """Read the application secret (the reader's with `read_only`, and only it), and reach
        the database (or its proxy) on its port only."""
        (self.read_only_secret if read_only else self.runtime_secret).grant_read(function.role)
        # Both rules in the function's stack (`remote_rule`): a policy's nested stack holds its
        # functions' rules, and the root stack does not grow with the number of policies.
        for database_group in self._runtime.security_groups:
            database_group.add_ingress_rule(
                function.security_group, self.port, "sweeper function", remote_rule=True
            )
            function.security_group.add_egress_rule(database_group, self.port, "sweeper function")

    def grant_direct_access(self, function: SweeperFunction) -> None:
        """Read the master secret (and the login users', to create them); reach the cluster."""
        self.secret.grant_read(function.role)
        for login in (self.app_secret, self.reader_secret):
            if login is not None:
                login.grant_read(function.role)
        self._direct.allow_from(function.security_group, self.port, "sweeper migrations")
