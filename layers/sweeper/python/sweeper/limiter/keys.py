"""The limiter table's keys.

A limit's items are `scope#KEY` (its bucket and gate, `sweeper.limiter.dynamodb`; a limit with
no rate has only the gate, when a 429 can name it: `sweeper.admission.regimes.has_gate`) and
`lease#KEY` (a concurrency cap's leases, `sweeper.limiter.leases`) and `budget#KEY#WINDOW` (a
budget's count, `sweeper.limiter.budget`), where KEY is the job's scope for the first limit and
`NAME:RENDERED` for each further one (`LimitConfig.limiter_key`); each regime's terms name the
items one of its keys has (`LimitTerm.ITEMS`). `closures#latest` is the latest closure's end,
which every gate close raises (sweeper.limiter.closures). The CDK app confines each consumer's
role to its own policy's items (sweeper_tools.deploy.limiter_keys).
"""

from __future__ import annotations

#: A scope's bucket and gate, one item per limiter key.
SCOPE_KEY_PREFIX = "scope#"
#: A concurrency cap's leases, one item per limiter key.
LEASE_KEY_PREFIX = "lease#"
#: A budget's count, one item per limiter key and window (sweeper.limiter.budget).
BUDGET_KEY_PREFIX = "budget#"
#: The latest closure's end, one item for the table (sweeper.limiter.closures): every gate
#: close raises it, so every consumer is granted it, as it is.
CLOSURES_KEY = "closures#latest"
