"""How a policy's redrive runs on its own (`[policies.redrive]`, `RedriveConfig`).

`automatic` names what the redrive function's schedule does (sweeper.redrive.run; infra/redrive.py):

- `"scheduled"` (the default): every 15 minutes, every dead letter the ledger and the limits let
  go back is moved (a throttled one once its limits have reopened);
- `"throttled"`: every minute; a run returns after one read of the DLQ's depth when it is empty,
  else moves back the letters whose job died of a limit (sweeper.redrive.auto), waiting in place
  for the limit's reopening when it falls within the run, paced by the limit; the letters that
  died otherwise wait for an operator (`sweeper redrive`).

An operator's redrive (`sweeper redrive`, the operator API) decides the same way whatever is set.
"""

from __future__ import annotations

from typing import Literal

from sweeper.config.base import _Strict

AutomaticRedrive = Literal["scheduled", "throttled"]
#: How often the schedule runs the redrive, by `automatic`. One minute is EventBridge
#: Scheduler's finest rate.
SCHEDULE_PERIOD_SECONDS: dict[AutomaticRedrive, int] = {"scheduled": 15 * 60, "throttled": 60}


class RedriveConfig(_Strict):
    """What the redrive function's schedule does (see the module docstring)."""

    automatic: AutomaticRedrive = "scheduled"

    @property
    def period_seconds(self) -> int:
        """How often the schedule runs the redrive."""
        return SCHEDULE_PERIOD_SECONDS[self.automatic]

    @property
    def watches(self) -> bool:
        """A scheduled run moves only throttled letters, waiting for their reopening."""
        return self.automatic == "throttled"
