"""The ledger's statements, split by who runs them, keep their text byte for byte.

The statements were one module (`ledger/queries.py`, 776 lines) until it was split into the
`*_sql` modules of `sweeper.ledger`, each read by one store: the producer's claims, the
schedulers' upsert, the consumer's settlements, the status reads, the operator's writes and the
retention's deletes. The fingerprints below were taken from that module before the split (the
first 16 hex digits of each statement's SHA-256), so a statement changed while moving fails here.
"""

from __future__ import annotations

import hashlib
import importlib
from pathlib import Path

import sweeper.ledger

LEDGER_DIR = Path(sweeper.ledger.__file__).resolve().parent
MODULE_MOST_LINES = 500

#: Every public statement of `ledger/queries.py` before the split, by name.
FINGERPRINTS = {
    "ACTIVE_SCOPES": "2e811b7b5b3eff35",
    "BATCH_AUDIT": "6f916790760d0406",
    "CLAIM_DUE": "84bad44c1bfbe1de",
    "CLAIM_WITHOUT_JIT": "3286993e90f6ecea",
    "COPY_SCHEDULE_STAGE": "7859d1a0cb22880f",
    "COUNT_BY_STATUS": "fa7ac3471fba8547",
    "COUNT_NOT_YET_DUE": "3c5f8e0e89ef48bd",
    "COUNT_ON_CONSUMERS": "f0ff46432cb6e649",
    "CREATE_SCHEDULE_STAGE": "f5aee897c9b831ce",
    "EMPTY_SCHEDULE_STAGE": "a59f31090fbcf939",
    "FINISH_RUN": "3409c08d9f403362",
    "INSERT_ACTION": "9ab58e9ba3a7ab59",
    "INSPECT_JOBS": "6b5a350cbff5e501",
    "JOBS_FOR_REDRIVE": "527b4ca381d8616f",  # with last_error_code (why a letter died)
    "LAST_RUN_AT_OR_BEFORE": "2b039769c2095b9a",
    "MARK_FAILED": "8c6f0a2bb5148bcc",
    "MARK_SUCCEEDED": "06d50ad4f6ffb4c6",
    "OLDEST_ELIGIBLE": "a82eaca43dff7230",
    "PRUNE_ACTIONS": "03b87d5a3537f53f",
    "PRUNE_RUNS": "46eae52981f5ea84",
    "PRUNE_SETTLED": "5f8d6fb70760c4aa",
    "RECLAIM_EXPIRED": "1db3b2c3a70068af",
    "RECORD_SNOOZE": "aae9ec976b6f8665",
    "RECORD_UNSETTLED": "b1d6442c20913e32",
    "RELEASE_LEASES": "13504eeea1b73388",
    "REOPEN_SKIPPED_RUN": "e9f0c517921c0b39",
    "RETRY_FAILED": "6bb10d2b2cec4fba",
    "RUNS_BETWEEN": "318071201119b03e",
    "SELECT_JOB": "10467a39f8f69e92",
    "SELECT_PAUSED": "61e14f8c8aa53aaa",
    "SELECT_POLICY_STATE": "82e31f0f93821c70",
    "SELECT_RUNS": "276a5f016fc804f8",
    "SETTLED_BETWEEN": "c806ead8b1fdda78",
    "SET_PAUSED": "aead8b04b6a6b3ac",
    "SET_RESUMED": "22e5c3b34874ef95",  # returns resumed_at (now), as SET_PAUSED its paused_at
    "START_RUN": "605796d21eb51c5d",
    "TARGETS_BY_KEYS": "64416765e9d4176f",
    "TARGET_COLUMNS": "565906a80a433e1f",
    "TARGET_SOURCE_COLUMNS": "f035d05445ac7f4e",
    "UPSERT_STAGED_JOBS": "a6b56c5aa2398edb",
}


def _statements() -> dict[str, list[tuple[str, str]]]:
    """Every public string constant of the ledger's `*_sql` modules: name -> [(module, text)]."""
    found: dict[str, list[tuple[str, str]]] = {}
    for path in sorted(LEDGER_DIR.glob("*_sql.py")):
        module = importlib.import_module(f"sweeper.ledger.{path.stem}")
        for name, value in vars(module).items():
            if name.isupper() and isinstance(value, str):
                found.setdefault(name, []).append((path.stem, value))
    return found


def _fingerprint(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def test_every_statement_has_one_home_and_its_text_unchanged() -> None:
    # Given the statements the ledger's `*_sql` modules define
    found = _statements()
    # Then each statement of the former module is defined in exactly one of them
    homes = {name: [module for module, _ in found.get(name, [])] for name in FINGERPRINTS}
    assert {name: where for name, where in homes.items() if len(where) != 1} == {}
    # And its text is the one it had, byte for byte
    changed = {
        name: module
        for name, [(module, text)] in ((name, found[name]) for name in FINGERPRINTS)
        if _fingerprint(text) != FINGERPRINTS[name]
    }
    assert changed == {}


def test_the_ledger_modules_stay_small() -> None:
    # Given every module of the ledger package
    sizes = {path.name: len(path.read_text().splitlines()) for path in LEDGER_DIR.glob("*.py")}
    # Then none is over the house's bound
    assert {name: n for name, n in sizes.items() if n > MODULE_MOST_LINES} == {}
