"""What the execution environments' forkserver preloads is safe to preload: the product's modules
read nothing from the environment at import, and the preload leaves what a fork can carry.

The preload runs in a process of its own: it imports the SDKs and swaps os.environ meanwhile.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from sweeper_local.preload import PRELOADED_MODULES

REPO = Path(__file__).resolve().parents[2]

PRELOAD_REPORT = """
import json
from sweeper_local import preload
loaded = preload.preload()
print(json.dumps({
    "readers": loaded.readers,
    "iterated_by": sorted(loaded.iterated_by),
    "failed": loaded.failed,
    "threads": loaded.threads,
    "rngs": len(loaded.rngs),
}))
"""


def preload_report() -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", PRELOAD_REPORT],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    report: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return report


def test_preload_imports_every_module_and_leaves_one_thread() -> None:
    report = preload_report()

    assert report["failed"] == []
    assert report["threads"] == 1
    assert report["iterated_by"] == []  # only urllib's proxy lookup goes through it all


def test_product_modules_read_nothing_from_the_environment_at_import() -> None:
    readers = preload_report()["readers"]

    assert isinstance(readers, dict)
    assert readers  # the SDKs do read some (what a child must then have the same)
    product = {k: v for k, v in readers.items() if v.split(".")[0].startswith("sweeper")}
    assert product == {}


def test_no_handler_is_preloaded() -> None:
    # Lambda imports the handler in the environment, after the function's variables are set
    assert not [m for m in PRELOADED_MODULES if m.startswith(("sweeper_fn_", "functions"))]
    assert not [m for m in PRELOADED_MODULES if m.startswith("tests")]
