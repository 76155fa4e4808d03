"""Migrations Lambda: a CloudFormation custom resource (CDK Provider framework) that applies the
ledger migrations on every deploy that changes them, exactly as `sweeper migrate` does.

Create and Update run `sweeper.ledger.migrate.migrate`; Delete does nothing (the ledger outlives
the stack's custom resource). A failure raises, so the deploy fails and rolls back.
"""

from __future__ import annotations

import os
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities import parameters
from aws_lambda_powertools.utilities.typing import LambdaContext

#: Fixed forever: a new physical id would make CloudFormation "delete" the old resource.
PHYSICAL_RESOURCE_ID = "sweeper-ledger-migrations"
#: A deploy reads the secret once; a short cache still spares a retry the second call.
SECRET_MAX_AGE_SECONDS = 60
CONNECT_TIMEOUT_SECONDS = 10

logger = Logger()


@logger.inject_lambda_context(log_event=False)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    request = event["RequestType"]
    if request == "Delete":
        logger.info("delete: the ledger is left as it is")
        return {"PhysicalResourceId": event.get("PhysicalResourceId", PHYSICAL_RESOURCE_ID)}

    # Imported here, not at module level: psycopg is only needed when there is work to do.
    from sweeper.ledger.migrate import migrate

    applied = migrate(database_conninfo())
    logger.info("migrations applied", extra={"request": request, "applied": applied})
    return {
        "PhysicalResourceId": PHYSICAL_RESOURCE_ID,
        "Data": {"Applied": ",".join(str(version) for version in applied)},
    }


def database_conninfo() -> str:
    """The cluster's connection string from its secret; TLS required.

    `SWEEPER_DATABASE_HOST` / `SWEEPER_DATABASE_PORT`, when set (an imported cluster), win over
    the secret's host and port.
    """
    from psycopg.conninfo import make_conninfo

    secret: Any = parameters.get_secret(
        os.environ["SWEEPER_DATABASE_SECRET_ARN"],
        transform="json",
        max_age=SECRET_MAX_AGE_SECONDS,
    )
    return make_conninfo(
        host=os.environ.get("SWEEPER_DATABASE_HOST") or secret["host"],
        port=os.environ.get("SWEEPER_DATABASE_PORT") or secret.get("port", 5432),
        user=secret["username"],
        password=secret["password"],
        dbname=secret.get("dbname", "postgres"),
        sslmode="require",
        connect_timeout=CONNECT_TIMEOUT_SECONDS,
    )
