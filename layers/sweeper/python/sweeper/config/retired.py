"""Policy keys that no longer do anything: a file that sets one still loads, with one warning line.

A policy model refuses unknown keys (`_Strict`), so a key taken out of it would break every
file that set it. A retired key is dropped before validation instead, so it reaches neither the
validated policy nor the functions' environment (`infra.function.policy_json`), and the loader
says once, in one line, what replaces it.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)

#: Each retired policy key and what to set instead.
RETIRED_POLICY_KEYS = {
    # Lambda samples its own invocations and takes no X-Ray sampling rule (docs/runbook.md).
    "trace_sample_rate": "ignored: Lambda takes no X-Ray sampling rule; set consumer.tracing = "
    '"active" to trace every consumer invocation, "passthrough" (the default) for none',
}


def drop_retired_keys(data: Any) -> Any:
    """`data` without the retired keys, each named in a warning line with what replaces it."""
    if not isinstance(data, dict):
        return data
    retired = [key for key in RETIRED_POLICY_KEYS if key in data]
    for key in retired:
        log.warning("policy %s: %s is %s", data.get("name", "?"), key, RETIRED_POLICY_KEYS[key])
    return {k: v for k, v in data.items() if k not in retired} if retired else data
