"""The regimes' config arms, one module each: `rate`, `cap` (`max_in_flight`), `budget`.

The union of them is `sweeper.config.limit.RegimeArm` (a pydantic discriminated union on
`regime`, as `action.kind` is); each regime's terms in `sweeper.admission.regimes.REGIMES` name
their arm. A new regime is its arm here, its terms (and admission) in sweeper.admission, and one
line in each of the two unions.
"""

from sweeper.config.regimes.base import Arm
from sweeper.config.regimes.budget import BudgetArm
from sweeper.config.regimes.cap import CapArm
from sweeper.config.regimes.rate import RateArm

__all__ = ["Arm", "BudgetArm", "CapArm", "RateArm"]
