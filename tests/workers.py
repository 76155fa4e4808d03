"""Which tests must share one pytest-xdist worker (`make test` runs `--dist loadgroup`).

Each worker is a session of its own: it starts its own PostgreSQL cluster, AWS stand-in and moto
(tests/conftest.py: each picks a free port and a fresh temporary folder, so workers never
clash). Tests are handed out one at a time to whichever worker is free, except these, which go
to one worker as a unit so that what they set up once is set up once:

- every test of a module that uses a module- or class-scoped fixture (a stack, a browser, a
  server shared by the module's tests): the whole module, on one worker;
- every test under a folder that caches costly work in session fixtures of its own conftest
  (`FOLDER_GROUPS`: tests/infra synthesizes each app variant once per session; it also builds
  into the repository's build/ folder, the deps layer and a python action's staged package, which
  two workers must not do side by side);
- the drills (tests/drills, also in `FOLDER_GROUPS`): each starts a whole local stack
  (PostgreSQL restarts, consumer environments in processes of their own) and waits for its
  jobs with deadlines of tens of seconds; four side by side on two cores starved each
  other's consumers (6 of 14 gave up waiting at `-n 4`, 2026-12-02); one at a time, as in a
  serial session, they passed.

A test that names its own `xdist_group` keeps it. A new test needs nothing: it is grouped by
these rules or runs wherever a worker is free.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import PurePosixPath

#: Folders (relative to the repository) whose tests share one worker, and the group's name.
FOLDER_GROUPS = {"tests/infra": "infra-synth", "tests/drills": "drills"}
#: Fixture scopes set up once per module (or class) of a worker.
MODULE_SCOPES = frozenset({"module", "class"})


def group_of(nodeid: str, fixture_scopes: Iterable[str]) -> str | None:
    """The xdist group of the test `nodeid` (`path::name`) whose fixtures have these scopes;
    None when it may run on any worker."""
    path = PurePosixPath(nodeid.split("::", 1)[0])
    for folder, group in FOLDER_GROUPS.items():
        if path.is_relative_to(folder):
            return group
    if MODULE_SCOPES.intersection(fixture_scopes):
        return str(path)
    return None
