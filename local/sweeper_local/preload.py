"""What the execution environments' forkserver imports once, so that a cold start forks a
process with these modules loaded instead of importing them in a fresh interpreter.

A preloaded module is state made before the function's environment existed, so preloading must
not change what a cold start means (docs/decisions.md, 2026-12-02):

- what the modules read from `os.environ` while they are imported is recorded, and a child whose
  environment differs from the forkserver's on one of those variables (or on what the
  interpreter itself reads at start: `PYTHON*`, `LD_*`, locale, `TZ`, the proxies) says so, and
  `lambda_runtime` starts that environment in a fresh interpreter instead;
- a preloaded module that the child's `sys.path` (a layer's directory first) would find
  elsewhere is stale the same way;
- every `random.Random` made while importing is reseeded in each child (CPython reseeds only
  the `random` module's own), as a fresh import would seed it.

Only `forkserver_preload` imports `preload()`'s modules: this module imports nothing heavy.
"""

from __future__ import annotations

import gc
import importlib
import os
import random
import sys
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import FrameType

#: What the handlers import before their own code: the SDKs (aws_xray_sdk.core alone is
#: 145 ms: its recorder builds a botocore client at import), and the product's modules that
#: functions/*/app.py import, which read nothing from the environment at import (tested). Never a
#: handler: Lambda imports it in the environment, after the function's variables are set.
PRELOADED_MODULES = (
    "boto3",
    "botocore.client",
    "pydantic",
    "pydantic_settings",
    "psycopg",
    "aws_lambda_powertools",
    "aws_lambda_powertools.metrics",
    "aws_lambda_powertools.tracing",
    "aws_lambda_powertools.utilities.batch",
    "aws_lambda_powertools.utilities.parser",
    "aws_lambda_powertools.utilities.parameters",
    "aws_lambda_powertools.utilities.typing",
    "aws_xray_sdk.core",
    "sweeper.runtime",
    "sweeper.observability",
    "sweeper.consumer",
    "sweeper.producer.run",
    "sweeper.discovery.wiring",
    "sweeper.discovery.run",
    "sweeper.intake.process",
    "sweeper.intake.webhook",
    "sweeper.operator_api.service",
    "sweeper.operator_api.runtime",
    "sweeper.redrive.run",
    "sweeper.producer.release",
    "sweeper.prune.retention",
    "sweeper.redrive.letters",
    "sweeper_local.lambda_runtime",
)

#: Read by the interpreter at start, or by urllib's proxy lookup (which reads every variable
#: named *_proxy): a fresh interpreter would see the child's values of these.
_INTERPRETER_PREFIXES = ("PYTHON", "LD_", "LC_")
_INTERPRETER_NAMES = frozenset({"LANG", "LANGUAGE", "TZ"})
#: The one reader allowed to go through the whole environment while preloading.
_PROXY_READER = "urllib.request"


def _interpreter_variable(name: str) -> bool:
    return (
        name.startswith(_INTERPRETER_PREFIXES)
        or name in _INTERPRETER_NAMES
        or name.lower().endswith("_proxy")
    )


@dataclass
class Preloaded:
    """What the forkserver loaded, and what of its environment that depended on."""

    #: Every variable read while importing, with its value then (None: unset).
    read: dict[str, str | None] = field(default_factory=dict)
    #: The module that first read each of them.
    readers: dict[str, str] = field(default_factory=dict)
    #: The interpreter's variables in the forkserver's environment.
    interpreter: dict[str, str] = field(default_factory=dict)
    #: Modules (outside urllib's proxy lookup) that went through the whole environment.
    iterated_by: set[str] = field(default_factory=set)
    #: Top-level modules imported while preloading, and where they were found.
    origins: dict[str, str | None] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)
    threads: int = 1
    rngs: list[random.Random] = field(default_factory=list)


#: Set in the forkserver (and so in every process it forks); None elsewhere.
LOADED: Preloaded | None = None


def _caller(frame: FrameType | None) -> str:
    """The module that read the environment (past os, the Mapping mixins and this module)."""
    while frame is not None:
        name = str(frame.f_globals.get("__name__", ""))
        if name not in ("os", "_collections_abc", "collections.abc", __name__):
            return name
        frame = frame.f_back
    return ""


class _RecordingEnviron(os._Environ[str]):
    """os.environ, noting what is read through it while `recording` is set."""

    recording: Preloaded | None = None

    def __getitem__(self, key: str) -> str:
        value: str | None = None
        try:
            value = super().__getitem__(key)
            return value
        finally:
            if self.recording is not None and key not in self.recording.read:
                self.recording.read[key] = value
                self.recording.readers[key] = _caller(sys._getframe(1))

    def __iter__(self) -> Iterator[str]:
        if self.recording is not None:
            caller = _caller(sys._getframe(1))
            if caller != _PROXY_READER:
                self.recording.iterated_by.add(caller)
        return super().__iter__()


def _origin(name: str) -> str | None:
    """Where importing top-level `name` afresh would find it on sys.path (None: nowhere)."""
    for finder in sys.meta_path:
        find_spec = getattr(finder, "find_spec", None)
        if find_spec is None:
            continue
        try:
            spec = find_spec(name, None)
        except (ImportError, ValueError):
            continue
        if spec is not None:
            if spec.origin is not None:
                return str(spec.origin)
            return ":".join(spec.submodule_search_locations or [])
    return None


def preload(modules: tuple[str, ...] = PRELOADED_MODULES) -> Preloaded:
    """Import `modules`, recording what that read of the environment (in the forkserver)."""
    global LOADED
    loaded = Preloaded()
    before = set(sys.modules)
    original = os.environ
    recorder = _RecordingEnviron(
        original._data,  # type: ignore[attr-defined]  # the same variables, not a copy
        original.encodekey,
        original.decodekey,
        original.encodevalue,
        original.decodevalue,
    )
    recorder.recording = loaded
    os.environ = recorder  # noqa: B003 - swapped back below; the data is the same dict
    try:
        for name in modules:
            try:
                importlib.import_module(name)
            except Exception as exc:  # the child imports it itself, as a fresh one would
                loaded.failed.append(f"{name}: {type(exc).__name__}: {exc}")
    finally:
        recorder.recording = None  # a module that kept `environ` keeps a quiet one
        os.environ = original  # noqa: B003
    loaded.interpreter = {k: v for k, v in os.environ.items() if _interpreter_variable(k)}
    tops = {name.partition(".")[0] for name in set(sys.modules) - before}
    loaded.origins = {top: _origin(top) for top in sorted(tops)}
    loaded.threads = threading.active_count()
    own = random._inst  # reseeded by CPython after a fork
    loaded.rngs = [
        o
        for o in gc.get_objects()
        if isinstance(o, random.Random) and not isinstance(o, random.SystemRandom) and o is not own
    ]
    os.register_at_fork(after_in_child=lambda: _reseed(loaded))
    sys.stdout.flush()  # nothing printed while importing is written again by every child
    sys.stderr.flush()
    LOADED = loaded
    return loaded


def _reseed(loaded: Preloaded) -> None:
    for rng in loaded.rngs:
        rng.seed()


def stale(environ: Mapping[str, str]) -> str | None:
    """Why this process (forked from the forkserver, its environment and sys.path now the
    function's) differs from a fresh interpreter's import of the preloaded modules; None when
    it does not (or nothing was preloaded)."""
    loaded = LOADED
    if loaded is None:
        return None
    if loaded.threads != 1:
        return f"preloading left {loaded.threads} threads (a fork has one)"
    if loaded.iterated_by:
        return f"{', '.join(sorted(loaded.iterated_by))} read the whole environment at import"
    for name, value in loaded.read.items():
        if environ.get(name) != value:
            return f"{name} is not what it was when the modules were preloaded"
    interpreter = {k: v for k, v in environ.items() if _interpreter_variable(k)}
    if interpreter != loaded.interpreter:
        changed = sorted(set(interpreter.items()) ^ set(loaded.interpreter.items()))
        return f"{changed[0][0]} is not what it was when the forkserver started"
    for top, origin in loaded.origins.items():
        if _origin(top) != origin:
            return f"{top} would be imported from elsewhere on this sys.path"
    return None
