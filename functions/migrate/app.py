"""Migrations Lambda: a CloudFormation custom resource (CDK Provider framework) that applies the
ledger migrations on every deploy that changes them, exactly as `sweeper migrate` does.

Create and Update run `sweeper.ledger.migrate.migrate` as the master user, then make sure the
login user of the application secret (`SWEEPER_APP_SECRET_ARN`) exists in the `sweeper_app` role
and the reader secret's (`SWEEPER_READER_SECRET_ARN`) in `sweeper_reader`, each with its
secret's password (sent as a SCRAM verifier, never as the password). Delete does nothing (the
ledger outlives the stack's custom resource). A failure raises, so the deploy fails and rolls
back.
"""

from __future__ import annotations

import os
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities import parameters
from aws_lambda_powertools.utilities.typing import LambdaContext

from sweeper import observability

#: Fixed forever: a new physical id would make CloudFormation "delete" the old resource.
PHYSICAL_RESOURCE_ID = "sweeper-ledger-migrations"
#: A deploy reads the secret once; a short cache still spares a retry the second call.
SECRET_MAX_AGE_SECONDS = 60
CONNECT_TIMEOUT_SECONDS = 10

logger = Logger()
tracer = observability.tracer()


@logger.inject_lambda_context(log_event=False)
@tracer.capture_lambda_handler(capture_response=False)  # payloads may hold customer ids
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    request = event["RequestType"]
    if request == "Delete":
        logger.info("delete: the ledger is left as it is")
        return {"PhysicalResourceId": event.get("PhysicalResourceId", PHYSICAL_RESOURCE_ID)}

    # Imported here, not at module level: psycopg is only needed when there is work to do.
    from sweeper.ledger.migrate import migrate
    from sweeper.ledger.roles import APP_ROLE, READER_ROLE, ensure_login

    conninfo = database_conninfo()
    applied = migrate(conninfo)
    logger.info("migrations applied", extra={"request": request, "applied": applied})
    for variable, role in (
        ("SWEEPER_APP_SECRET_ARN", APP_ROLE),
        ("SWEEPER_READER_SECRET_ARN", READER_ROLE),
    ):
        secret_arn = os.environ.get(variable)
        if not secret_arn:
            continue
        login: Any = parameters.get_secret(
            secret_arn, transform="json", max_age=SECRET_MAX_AGE_SECONDS
        )
        created = ensure_login(conninfo, login.get("username", ""), login.get("password", ""), role)
        logger.info("login user ready", extra={"role": role, "user_created": created})
    return {
        "PhysicalResourceId": PHYSICAL_RESOURCE_ID,
        "Data": {"Applied": ",".join(str(version) for version in applied)},
    }


def database_conninfo() -> str:
    """The cluster's connection string from the master secret; TLS verified (verify-full).

    `SWEEPER_DATABASE_HOST` / `SWEEPER_DATABASE_PORT`, when set (an imported cluster), win over
    the secret's host and port.
    """
    from sweeper.ledger.connection import secret_conninfo

    secret: Any = parameters.get_secret(
        os.environ["SWEEPER_DATABASE_SECRET_ARN"],
        transform="json",
        max_age=SECRET_MAX_AGE_SECONDS,
    )
    return secret_conninfo(
        secret,
        host=os.environ.get("SWEEPER_DATABASE_HOST"),
        port=os.environ.get("SWEEPER_DATABASE_PORT"),
        connect_timeout_seconds=CONNECT_TIMEOUT_SECONDS,
    )
