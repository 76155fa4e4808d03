"""moto in server mode, with each DynamoDB request atomic as it is on AWS.

moto serves each request on its own thread, and its DynamoDB handler checks a write's condition,
applies the write and builds the response (`ReturnValues`) as separate steps without a lock. Two
conditional writes to one item can then interleave: measured with the shared limiter's test,
a response's `UPDATED_NEW` showed another request's write, and two consumers were handed the same
slot. DynamoDB never allows that, and the limiter relies on it. Until moto serialises requests
itself, this entry point does: one lock around each DynamoDB request, from parsing to response.
It is hand-written because no emulator option does it; it changes nothing else of moto.

Run: `python -m sweeper_local.moto_server -H 127.0.0.1 -p PORT` (the same arguments as moto's).
"""

from __future__ import annotations

import functools
import threading
from typing import Any


def serialise_dynamodb_requests() -> None:
    """Make moto's DynamoDB handler serve one request at a time (other services unchanged)."""
    from moto.dynamodb.responses import DynamoHandler

    lock = threading.Lock()
    handle = DynamoHandler.call_action

    @functools.wraps(handle)
    def call_action(self: DynamoHandler, *args: Any, **kwargs: Any) -> Any:
        with lock:
            return handle(self, *args, **kwargs)

    DynamoHandler.call_action = call_action  # type: ignore[method-assign]


def main() -> None:
    serialise_dynamodb_requests()
    from moto.server import main as moto_main

    moto_main()


if __name__ == "__main__":
    main()
