"""The operator's tools that never run in a Lambda: planning, doctor, ramp, smoke, the event source.

Plain logic on the product package (`sweeper`), shared by the CLI (`sweeper_cli`), the CDK app
and the local stack; installed with the CLI (`pip install '.[cli]'`), never in the Lambda layer.
"""
