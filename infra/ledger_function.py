"""A function of one policy that works on the ledger, built one way for every such function.

The producer, consumer, redrive, discovery, prune and intake functions each need the same four
things besides their own grants: the policy in their environment, the ledger's connection
settings, read access to the runtime secret with a path to the database (or its proxy) on its
port, and HTTPS to the AWS interface endpoints they call (Secrets Manager at least).
"""

from __future__ import annotations

from collections.abc import Mapping

from constructs import Construct

from infra.database import Database
from infra.function import SweeperFunction
from infra.network import Network
from infra.packaging import Packaging
from sweeper.config import Policy


class LedgerFunction(SweeperFunction):
    """A SweeperFunction of `policy` with the ledger's environment, grants and network path.

    `aws_apis` names, for its security-group rule, what the function reaches through the
    interface endpoints (e.g. "SQS and Secrets Manager").
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        policy: Policy,
        database: Database,
        network: Network,
        aws_apis: str | None,
        code_name: str,
        description: str,
        packaging: Packaging,
        timeout_seconds: int,
        memory_mb: int,
        environment: Mapping[str, str] | None = None,
        reserved_concurrency: int | None = None,
    ) -> None:
        super().__init__(
            scope,
            construct_id,
            code_name=code_name,
            description=description,
            packaging=packaging,
            network=network,
            environment={
                "SWEEPER_POLICY": policy.model_dump_json(),
                **(environment or {}),
                **database.runtime_environment(),
            },
            timeout_seconds=timeout_seconds,
            memory_mb=memory_mb,
            reserved_concurrency=reserved_concurrency,
        )
        database.grant_runtime_access(self)
        if aws_apis is not None:
            self.allow_https_to(network.aws_api_peer, aws_apis)
