"""Deployment options: where sweeper runs, as opposed to what it does (the policy file).

The policies come from the one policy file, validated by `sweeper.config.SweeperConfig`. What
only the deployment needs (an existing VPC or database, RDS Proxy, capacity, the alarm e-mail)
comes from CDK context: `cdk.json`, or `-c key=value` on the command line. Context values arrive
as strings from the command line, so every field is validated (and coerced) here; a bad value
fails synth with a message that names the context key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Self

from constructs import Node
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    model_validator,
)

from sweeper.config import describe_validation_error
from sweeper.errors import ConfigError
from sweeper_tools.planning.costs import Network as NetworkProfile

DEFAULT_CONFIG_FILE = "sweeper.toml"
DEFAULT_STACK_NAME = "Sweeper"
#: Aurora Serverless v2 capacity range (ACU). 0.5 keeps the writer warm: with a producer every
#: few minutes, a cluster allowed to pause (minimum 0) would resume on almost every run.
DATABASE_MIN_CAPACITY_ACU = 0.5
DATABASE_MAX_CAPACITY_ACU = 4.0
DATABASE_PORT = 5432


def _split_list(value: Any) -> Any:
    """`-c key=a,b` arrives as one string; cdk.json may hold a real list."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


CommaList = Annotated[list[str], BeforeValidator(_split_list)]
#: An IAM role's or user's ARN, as `aws:PrincipalArn` names it (a role's sessions included). Not
#: an account (`:root` would admit the root user only), not a session, not a wildcard.
PrincipalArn = Annotated[
    str, StringConstraints(pattern=r"^arn:aws[\w-]*:iam::\d{12}:(role|user)/[\w+=,.@/-]+$")
]


class DeploymentOptions(BaseModel):
    """Every context key the app reads, with its default."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    stack_name: str = Field(default=DEFAULT_STACK_NAME, pattern=r"^[A-Za-z][A-Za-z0-9-]{0,29}$")
    config: Path = Field(default=Path(DEFAULT_CONFIG_FILE), description="the policy file")

    # An existing VPC instead of a new one: all four keys, or none.
    vpc_id: str | None = Field(default=None, pattern=r"^vpc-([0-9a-f]{8}|[0-9a-f]{17})$")
    vpc_cidr: str | None = Field(default=None, pattern=r"^\d+\.\d+\.\d+\.\d+/\d+$")
    vpc_availability_zones: CommaList | None = None
    vpc_private_subnet_ids: CommaList | None = None
    # `lean`: no interface endpoints in a new VPC, SQS and Secrets Manager through the NAT
    # (infra/network.py; what it gives up is in docs/deploy.md). The same names `sweeper plan`
    # prices. Nothing to leave out of an imported VPC, where sweeper creates no endpoint.
    network: NetworkProfile = NetworkProfile.DEFAULT

    # An existing Aurora PostgreSQL cluster instead of a new one: endpoint, secret and group.
    database_endpoint: str | None = None
    database_port: int = Field(default=DATABASE_PORT, ge=1, le=65_535)
    database_secret_arn: str | None = Field(default=None, pattern=r"^arn:aws[\w-]*:secretsmanager:")
    database_security_group_id: str | None = Field(
        default=None, pattern=r"^sg-([0-9a-f]{8}|[0-9a-f]{17})$"
    )

    # With a new cluster: put an RDS Proxy in front of it. With an imported endpoint: that
    # endpoint is a proxy. Either way the functions turn server-side prepared statements off.
    rds_proxy: bool = False
    database_min_capacity_acu: float = Field(default=DATABASE_MIN_CAPACITY_ACU, ge=0, le=256)
    database_max_capacity_acu: float = Field(default=DATABASE_MAX_CAPACITY_ACU, ge=1, le=256)
    deletion_protection: bool = True
    alarm_email: str | None = Field(default=None, pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
    # Who may put events on the intake bus (infra/intake_bus.py), besides the stack's intake
    # sender role: IAM role or user ARNs, of this account or another. Nobody else, by default.
    intake_event_senders: Annotated[list[PrincipalArn], BeforeValidator(_split_list)] = Field(
        default_factory=list
    )
    # CloudTrail data events for the operator functions (infra/operator_audit.py).
    operator_trail: bool = True

    @property
    def policy_dir(self) -> Path:
        """The policy file's directory (a relative `config` is read from the repository root,
        as infra.app reads it): an action's relative paths are read against it."""
        root = Path(__file__).resolve().parents[1]
        return (self.config if self.config.is_absolute() else root / self.config).parent

    @model_validator(mode="after")
    def _complete_imports(self) -> Self:
        vpc = [self.vpc_id, self.vpc_cidr, self.vpc_availability_zones, self.vpc_private_subnet_ids]
        if any(v is not None for v in vpc) and not all(v is not None for v in vpc):
            raise ValueError(
                "an imported VPC needs vpc_id, vpc_cidr, vpc_availability_zones "
                "and vpc_private_subnet_ids"
            )
        if (
            self.vpc_availability_zones is not None
            and self.vpc_private_subnet_ids is not None
            and len(self.vpc_availability_zones) != len(self.vpc_private_subnet_ids)
        ):
            raise ValueError("vpc_private_subnet_ids needs one subnet per availability zone")
        database = [
            self.database_endpoint,
            self.database_secret_arn,
            self.database_security_group_id,
        ]
        if any(v is not None for v in database) and not all(v is not None for v in database):
            raise ValueError(
                "an imported database needs database_endpoint, database_secret_arn "
                "and database_security_group_id"
            )
        if self.database_min_capacity_acu > self.database_max_capacity_acu:
            raise ValueError("database_min_capacity_acu exceeds database_max_capacity_acu")
        if self.database_min_capacity_acu * 2 % 1 or self.database_max_capacity_acu * 2 % 1:
            raise ValueError("Aurora capacity moves in steps of 0.5 ACU")
        return self

    @property
    def imports_vpc(self) -> bool:
        return self.vpc_id is not None

    @property
    def lean_network(self) -> bool:
        return self.network is NetworkProfile.LEAN

    @property
    def imports_database(self) -> bool:
        return self.database_endpoint is not None

    @classmethod
    def from_context(cls, node: Node) -> DeploymentOptions:
        """Read every known key from CDK context; a bad value raises ConfigError naming it."""
        raw = {
            name: value
            for name in cls.model_fields
            if (value := node.try_get_context(name)) is not None
        }
        try:
            return cls.model_validate(raw)
        except ValidationError as exc:
            raise ConfigError(f"CDK context: {describe_validation_error(exc)}") from exc
