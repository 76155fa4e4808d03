"""The platform's limits (Lambda, SQS, the AWS SDK's connection pool) that the policy models, the
event source check, the queue adapters, the capacity plan and the CDK app all hold a
configuration to: the ground floor, importing nothing of sweeper.
"""

from __future__ import annotations

#: SQS's longest visibility timeout.
SQS_MAX_VISIBILITY_TIMEOUT_SECONDS = 43_200
#: Lambda's longest invocation, and its shortest.
LAMBDA_MIN_TIMEOUT_SECONDS = 1
LAMBDA_MAX_TIMEOUT_SECONDS = 900
#: Batch sizes of a standard queue's mapping; above the first, a batching window is required.
MAX_BATCH_SIZE_WITHOUT_WINDOW = 10
MAX_BATCH_SIZE = 10_000
MAX_BATCHING_WINDOW_SECONDS = 300
#: The range of an event source mapping's ScalingConfig.MaximumConcurrency.
MIN_MAXIMUM_CONCURRENCY = 2
MAX_MAXIMUM_CONCURRENCY = 1000
#: AWS's guidance for the queue: six function timeouts plus the batching window.
VISIBILITY_TIMEOUTS_PER_FUNCTION_TIMEOUT = 6
#: Lambda's range of a function's memory (128 MB to 10,240 MB, the Lambda Developer Guide's
#: "Configure Lambda function memory").
LAMBDA_MIN_MEMORY_MB = 128
LAMBDA_MAX_MEMORY_MB = 10_240
#: Lambda gives a function one vCPU (one vCPU-second of credits per second) at 1,769 MB, and a
#: share in proportion below (the same page).
MB_PER_VCPU = 1769
#: botocore's default connection pool per client: more concurrent calls would queue for one.
MAX_PUBLISH_CONCURRENCY = 10


def recommended_visibility_timeout_seconds(
    function_timeout_seconds: int, batch_window_seconds: int
) -> int:
    """Six function timeouts plus the batching window (what the CDK app gives the work queue)."""
    return (
        VISIBILITY_TIMEOUTS_PER_FUNCTION_TIMEOUT * function_timeout_seconds + batch_window_seconds
    )
