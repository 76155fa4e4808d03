"""Each action kind's deploy-time provider, keyed by `action.kind` (sweeper_tools.deploy.base).

The CDK app, `sweeper doctor`, `smoke`, `plan` and the local stack ask `deploy_for(action)`;
adding a kind adds its module here and one line of `DEPLOY_KINDS` (a test fails while a kind of
`sweeper.config.action.KINDS` has none).
"""

from __future__ import annotations

from typing import Any, Final

from sweeper.actions.base import ActionKind
from sweeper_tools.deploy.base import DeployKind
from sweeper_tools.deploy.http import HttpDeploy
from sweeper_tools.deploy.lambda_invoke import LambdaDeploy
from sweeper_tools.deploy.python_call import PythonDeploy
from sweeper_tools.deploy.s3_delete import S3DeleteDeploy

#: Each kind's name -> its deploy-time provider.
DEPLOY_KINDS: Final[dict[str, type[DeployKind[Any]]]] = {
    "http": HttpDeploy,
    "s3_delete": S3DeleteDeploy,
    "lambda": LambdaDeploy,
    "python": PythonDeploy,
}


def deploy_for(action: ActionKind) -> DeployKind[Any]:
    """The deploy-time provider of a policy's action."""
    return DEPLOY_KINDS[action.kind](action)


__all__ = ["DEPLOY_KINDS", "DeployKind", "deploy_for"]
