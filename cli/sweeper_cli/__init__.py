"""`sweeper`: the operator's command line. Every command calls the same logic as the Lambdas.

One module per command group; each registers its commands on the top-level group, `main`.
"""

from importlib import import_module

from sweeper_cli.base import main

__all__ = ["main"]

#: The command modules, one a line; importing one registers its commands on `main`.
COMMAND_MODULES = (
    "audit",
    "bench",
    "checks",
    "console",
    "control",
    "demo",
    "discover",
    "intake",
    "limits",
    "local",
    "maintenance",
    "obligations",
    "plan",
    "redrive",
    "webconsole",
)
for _module in COMMAND_MODULES:
    import_module(f"sweeper_cli.{_module}")
