"""The budget regime's config arm: calls per window, spread evenly, a share kept.

Spelled on a limit's table as `budget = { limit = 100000 }` (sweeper.config.budget). Its
admission is sweeper.admission.budget (a wrapper: one unit of the window's `budget#` item per
call), its terms sweeper.admission.budget_terms.
"""

from __future__ import annotations

from typing import Literal

from sweeper.config.budget import BudgetConfig
from sweeper.config.regimes.base import Arm


class BudgetArm(Arm):
    """A limit's budget (sweeper.config.budget)."""

    regime: Literal["budget"] = "budget"
    budget: BudgetConfig
