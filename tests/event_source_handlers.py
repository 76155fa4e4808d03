"""A tiny Lambda handler for the local event source's tests, importable by its worker processes.

Each message body says what to do on the message's first delivery (JSON; `{}` does nothing):
`sleep` seconds, `spin` (use that many seconds of CPU), `raise`, `kill` (SIGKILL its own
process, as the OOM killer would), `settle` (journal the batch as settled, then sleep `sleep`
seconds), or `fail` with a partial batch response naming `self` (this record), `unknown` (an id
not in the batch), `empty`, `null`, or `bad_key` (an entry without `itemIdentifier`). On a
redelivery it only succeeds.

Every invocation journals its start and end (pid, times, message ids, receive counts) as JSON
lines in the file `SWEEPER_TEST_JOURNAL` names, so a test can see batch sizes and overlaps.
"""

from __future__ import annotations

import json
import os
import signal
import time
from typing import Any

JOURNAL_ENV = "SWEEPER_TEST_JOURNAL"

_FAILURES: dict[str, Any] = {
    "unknown": {"itemIdentifier": "not-a-message-of-this-batch"},
    "empty": {"itemIdentifier": ""},
    "null": {"itemIdentifier": None},
    "bad_key": {"messageId": "a key Lambda does not read"},
}


def _journal(event: str, **fields: Any) -> None:
    line = json.dumps({"event": event, "pid": os.getpid(), "at": time.monotonic(), **fields})
    with open(os.environ[JOURNAL_ENV], "a", encoding="utf-8") as journal:
        journal.write(line + "\n")


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    records = event["Records"]
    ids = [r["messageId"] for r in records]
    _journal(
        "start",
        ids=ids,
        receive_counts=[int(r["attributes"]["ApproximateReceiveCount"]) for r in records],
    )
    failures: list[Any] = []
    for record in records:
        if record["attributes"]["ApproximateReceiveCount"] != "1":
            continue
        todo = json.loads(record["body"])
        if todo.get("settle"):
            _journal("settled", ids=ids)
        if "sleep" in todo:
            time.sleep(float(todo["sleep"]))
        if "spin" in todo:
            until = time.process_time() + float(todo["spin"])
            while time.process_time() < until:
                pass
        if todo.get("raise"):
            raise RuntimeError("the test handler was told to fail")
        if todo.get("kill"):
            os.kill(os.getpid(), signal.SIGKILL)
        fail = todo.get("fail")
        if fail == "self":
            failures.append({"itemIdentifier": record["messageId"]})
        elif fail is not None:
            failures.append(_FAILURES[fail])
    _journal("end", ids=ids)
    return {"batchItemFailures": failures}
