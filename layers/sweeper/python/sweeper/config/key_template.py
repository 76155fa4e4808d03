"""The fields of a scope's or a limit's key template (`{tenant_id}`, `{params.account}`).

The policy's models check a template's fields against those a key may use
(`sweeper.config.limit`); the limiter renders the IAM patterns of a policy's keys
(`sweeper.limiter.keys`) and `sweeper.failing` matches closed keys against a template, each
reading the fields with this one pattern.
"""

from __future__ import annotations

import re
from typing import Final

#: One `{field}` of a key template; group 1 is its name (`params.NAME` for a call's param).
KEY_FIELD_RE: Final = re.compile(r"{([A-Za-z_][\w.]*)}")
