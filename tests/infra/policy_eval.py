"""A small evaluator of resource-policy statements, as IAM evaluates them, for template tests.

A request names an action, its principal (an IAM principal's ARN, or a service) and its
condition keys. Statements come from the synthesized template, so ARNs may be CloudFormation
references (`{"Fn::GetAtt": [...]}`): they compare as the same dict on both sides.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def condition_holds(operator: str, actual: Any, expected: Any) -> bool:
    """One condition operator on one key; a missing key makes `...IfExists` and a negated
    operator (`...NotEquals`) true and any other false."""
    if actual is None:
        return operator.endswith("IfExists") or "Not" in operator
    base = operator.removesuffix("IfExists")
    values = as_list(expected)
    if base == "Bool":
        return str(actual).lower() in [str(v).lower() for v in values]
    found = actual in values
    return not found if "Not" in base else found


def statement_applies(statement: dict[str, Any], request: dict[str, Any]) -> bool:
    actions = as_list(statement["Action"])
    service_prefix = request["action"].split(":")[0]
    if request["action"] not in actions and f"{service_prefix}:*" not in actions:
        return False
    principal = statement.get("Principal", "*")
    if principal not in ("*", {"AWS": "*"}):
        listed = as_list(principal.get("AWS", []))
        services = as_list(principal.get("Service", []))
        if request.get("principal_arn") not in listed and request.get("service") not in services:
            return False
    resources = as_list(statement.get("Resource", []))
    if "resource" in request and not any(
        _resource_matches(r, request["resource"]) for r in resources
    ):
        return False
    context = request["context"]
    return all(
        condition_holds(operator, context.get(key), expected)
        for operator, keys in statement.get("Condition", {}).items()
        for key, expected in keys.items()
    )


def _resource_matches(pattern: Any, resource: Any) -> bool:
    """A resource ARN against a statement's: equal, or matched by its `*` wildcards."""
    if isinstance(pattern, str) and isinstance(resource, str):
        return fnmatchcase(resource, pattern)
    return bool(pattern == resource)


def decision(statements: list[dict[str, Any]], request: dict[str, Any]) -> str:
    """`deny` (an explicit Deny applies), `allow` (the policy allows), or `identity` (left to
    the caller's identity policy)."""
    applying = [s for s in statements if statement_applies(s, request)]
    if any(s["Effect"] == "Deny" for s in applying):
        return "deny"
    return "allow" if applying else "identity"


def iam_request(action: str, principal_arn: Any, **context: Any) -> dict[str, Any]:
    """A request by an IAM principal (a role, or a session of it), over TLS."""
    return {
        "action": action,
        "principal_arn": principal_arn,
        "context": {
            "aws:PrincipalArn": principal_arn,
            "aws:PrincipalIsAWSService": "false",
            "aws:SecureTransport": "true",
            **context,
        },
    }


def service_request(action: str, service: str, source_arn: Any) -> dict[str, Any]:
    """A request by an AWS service on behalf of `source_arn` (None: no source given)."""
    return {
        "action": action,
        "service": service,
        "context": {
            "aws:PrincipalIsAWSService": "true",
            "aws:SourceArn": source_arn,
            "aws:SecureTransport": "true",
        },
    }
