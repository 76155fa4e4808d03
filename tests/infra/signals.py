"""What the synthesized template says about alarms and the dashboard, read by the naming rules.

Alarm names follow infra/observability/base.py: `<stack>-<policy>-<id>` or `<stack>-<id>`, the id in
PascalCase. The dashboard body is a CloudFormation join; references become `<LogicalId>`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tests.infra.conftest import Synth

ALARM_ID = re.compile(r"^[A-Z][A-Za-z0-9]+$")


def template_alarm_ids(synth: Synth) -> dict[str, str]:
    """Alarm name → alarm id, for every alarm of the template, by the naming convention."""
    stack = synth.stack.stack_name
    policies = sorted((p.name for p in synth.config.policies), key=len, reverse=True)
    found: dict[str, str] = {}
    for resource in synth.resources("AWS::CloudWatch::Alarm").values():
        name = resource["Properties"].get("AlarmName")
        assert isinstance(name, str), f"an alarm without a fixed AlarmName: {name!r}"
        assert name.startswith(f"{stack}-"), (
            f"alarm {name!r} is not named <stack>-[<policy>-]<id> (infra/observability/base.py)"
        )
        rest = name.removeprefix(f"{stack}-")
        for policy in policies:
            if rest.startswith(f"{policy}-"):
                rest = rest.removeprefix(f"{policy}-")
                break
        assert ALARM_ID.match(rest), f"alarm {name!r}: id {rest!r} is not PascalCase"
        found[name] = rest
    return found


def dashboard_widgets(synth: Synth) -> list[dict[str, Any]]:
    """The widgets of the dashboards (the stack's and each policy's), with every CloudFormation
    reference replaced by its logical ID."""
    widgets: list[dict[str, Any]] = []
    for dashboard in synth.resources("AWS::CloudWatch::Dashboard").values():
        widgets += json.loads(dashboard_body(dashboard))["widgets"]
    return widgets


def dashboard_body(dashboard: dict[str, Any]) -> str:
    """A dashboard's body as text, references as `<LogicalId>`."""
    body = dashboard["Properties"]["DashboardBody"]
    if isinstance(body, dict):
        separator, parts = body["Fn::Join"]
        body = separator.join(_flatten(part) for part in parts)
    return str(body)


def _flatten(part: Any) -> str:
    if isinstance(part, str):
        return part
    if "Ref" in part:
        return f"<{part['Ref']}>"
    if "Fn::GetAtt" in part:
        return f"<{part['Fn::GetAtt'][0]}>"
    return "<intrinsic>"


def dashboard_signals(synth: Synth) -> set[str]:
    """What an operator can read on the dashboard: metric names and the ids of shown alarms."""
    by_logical_id = {
        logical_id: template_alarm_ids(synth).get(resource["Properties"]["AlarmName"])
        for logical_id, resource in synth.resources("AWS::CloudWatch::Alarm").items()
    }
    signals: set[str] = set()
    for widget in dashboard_widgets(synth):
        properties = widget.get("properties", {})
        for entry in properties.get("metrics", []):
            options = entry[-1] if entry and isinstance(entry[-1], dict) else {}
            if options.get("visible") is False:
                continue  # an input of a math expression, not drawn
            names = [item for item in entry if isinstance(item, str)]
            if len(names) >= 2:  # [namespace, metric name, dimension, value, ...]
                signals.add(names[1])
        for arn in properties.get("alarms", []):
            alarm_id = by_logical_id.get(arn.strip("<>"))
            if alarm_id:
                signals.add(alarm_id)
    return signals
