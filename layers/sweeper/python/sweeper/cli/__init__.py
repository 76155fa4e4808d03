"""`sweeper`: the operator's command line. Every command calls the same logic as the Lambdas.

One module per command group; each registers its commands on the top-level group, `main`.
"""

from sweeper.cli import (
    bench,
    console,
    demo,
    intake,
    local,
    maintenance,
    obligations,
    plan,
    redrive,
)
from sweeper.cli.base import main

__all__ = ["main"]

# The command modules register their commands when imported.
del bench, console, demo, intake, local, maintenance, obligations, plan, redrive
