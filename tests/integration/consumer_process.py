"""One consumer invocation in a process of its own, as a Lambda execution environment runs it.

`python -m tests.integration.consumer_process EVENT_FILE TIMEOUT_SECONDS` loads the real handler
(functions/consumer/app.py) with the environment it inherits, invokes it once with a context of
that timeout, and prints the batch response as one JSON line. Tests kill it mid-call to leave
behind what a real crash leaves (an in-progress idempotency record, a leased job).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from sweeper_local.lambda_runtime import LocalLambdaContext, load_handler


def main(event_file: str, timeout_seconds: str) -> None:
    handler = load_handler("consumer")  # the cold start happens before the clock starts
    context = LocalLambdaContext("sweeper-consumer", timeout_seconds=float(timeout_seconds))
    event = json.loads(Path(event_file).read_text(encoding="utf-8"))
    print(json.dumps(handler(event, context)), flush=True)  # the parent reads it


if __name__ == "__main__":
    main(*sys.argv[1:3])
