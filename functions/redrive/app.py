"""Redrive Lambda: moves throttled and terminal jobs on from the dead-letter queue (issue 4).

A placeholder so that the infrastructure can deploy the function, its role and its schedule now;
it fails loudly (and so alarms) until the real handler replaces it.
"""

from typing import Any


def handler(event: dict[str, Any], context: Any) -> None:
    raise NotImplementedError("redrive: see issue 4")
