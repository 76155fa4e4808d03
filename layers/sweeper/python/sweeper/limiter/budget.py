"""Budgets on DynamoDB: a limit's calls per window, counted fleet-wide, paced evenly.

One item per budget key and window in the limiter table, `budget#KEY#START` (KEY the limit's
limiter key, START the window's start in epoch seconds; a rolling window's item is
`budget#KEY#rolling`). It holds `spent` (calls taken in the window) and `next_us` (the
earliest time of the next call, epoch microseconds). A call takes one unit with one
conditional UpdateItem on both as it read them (`take`), so a race is lost, never doubled:
the loser's answer carries the item as it is now (ReturnValuesOnConditionCheckFailure) and it
tries again at once, no read. A batch's threads take their units one at a time through a lock
per process, so the races are between environments only.

The rule (`next_slot`, a pure function), with `S = limit x (1 - reserve_fraction)` rounded
down:

- **fixed** window [start, end): the window's first call starts its even line at its time;
  after it, `next` is where the line stands. A call's slot is `max(now, next)`; with
  `left = S - spent` units left it is granted when `left >= 1` and the slot is before `end`,
  and the line moves on from `base = max(next, now - C)` to `base + (end - base) / left`: what
  is left, spread evenly over the time left. C = `catch_up_share x period` (1 % of the window,
  BUDGET_CATCH_UP_SHARE): slots the line passed with no call to take them (the fleet starting,
  a batch's turnover) are made up by the next calls at once, up to C of them; time unused
  beyond C is given up, and what is left is spread over the rest of the window. So while the
  fleet can keep up, the calls made are never ahead of the line (one call) nor behind it by
  more than C of it (1 % of the window's S); after an idle spell the first calls go at once,
  at most C's worth (the limit's rate, if any, paces them). The window never holds more than
  S calls (the reserve is never spent): a call past them is refused until `end`, the next
  window.
- **rolling** window of length P: each call leaves the window P after it was made, so the unit
  it spent comes back then. Slots are `P / S` apart, always: a unit is spent only once the one
  spent a window before it has come back, so any P seconds hold at most S calls. Time not used
  is not made up: a burst spent to catch up would come back as a burst a window later.

A unit taken for a call that is then not made (its other limits deferred it) goes back to a
fixed window's count (`give_back`), and the line to where the take found it while no later
unit was taken.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from sweeper.limiter.base import Denial
from sweeper.limiter.items import US, get_item, n, update_item
from sweeper.limiter.keys import BUDGET_KEY_PREFIX
from sweeper.vendor_limits.pace import window_start

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

#: A take that loses this many races in a row is refused for a moment (another environment
#: is taking the same budget's units meanwhile).
MAX_BUDGET_RACES = 8
BUDGET_RACE_RETRY_SECONDS = 0.05
#: Items a process remembers as it last saw them (a hint: a stale one costs a lost race).
MAX_ITEMS_SEEN = 1024
#: A window's item expires (DynamoDB TTL) this long after the window ends.
BUDGET_ITEM_KEPT_SECONDS = 86_400
#: How far behind its even line a fixed window's calls may make up at once, as a share of the
#: window: the spend stays within 1 % of the window's budget of the line while calls keep up
#: (a fifth of issue 43's ±5 %), and a burst after an idle spell is at most that 1 %.
BUDGET_CATCH_UP_SHARE = 0.01


@dataclass(frozen=True, slots=True)
class BudgetRule:
    """A budget as its limiter counts it: `spendable` calls per `period_seconds`."""

    spendable: int
    period_seconds: float
    window: Literal["fixed", "rolling"] = "fixed"
    offset_seconds: float = 0.0

    def window_of(self, now: float) -> tuple[float, float] | None:
        """The fixed window holding `now`, (start, end); None for a rolling window."""
        if self.window == "rolling":
            return None
        start = window_start(now, self.period_seconds, self.offset_seconds)
        return start, start + self.period_seconds

    def item_key(self, key: str, now: float) -> str:
        """The item counting `key`'s units at `now`."""
        window = self.window_of(now)
        suffix = "rolling" if window is None else f"{window[0]:.0f}"
        return f"{BUDGET_KEY_PREFIX}{key}#{suffix}"


@dataclass(frozen=True, slots=True)
class BudgetItem:
    """A window's item as read or written: units spent, and the next slot (µs; 0: none yet)."""

    spent: int = 0
    next_us: int = 0


@dataclass(frozen=True, slots=True)
class BudgetSlot:
    """A unit taken: the call's slot (epoch seconds), the item it was counted in, the item the
    take left (`after`), and where the take found the line (`line_us`, the item's `next_us`)."""

    slot_at: float
    item_key: str
    after: BudgetItem
    line_us: int


def next_slot(
    rule: BudgetRule, item: BudgetItem, now: float, horizon: float
) -> tuple[float, BudgetItem] | Denial:
    """The next call's slot and the item after it, or a denial (see the module docstring).
    A slot further than `horizon` from now is refused until it comes, unwritten."""
    now_us = int(now * US)
    slot_us = max(now_us, item.next_us)
    window = rule.window_of(now)
    if window is None:
        base_us = slot_us
        step_us = math.ceil(rule.period_seconds * US / rule.spendable)
    else:
        end_us = int(window[1] * US)
        left = rule.spendable - item.spent
        if left < 1 or slot_us >= end_us:
            return Denial(end_us / US, "budget")
        catch_up_us = int(BUDGET_CATCH_UP_SHARE * rule.period_seconds * US)
        base_us = slot_us if item.next_us == 0 else max(item.next_us, now_us - catch_up_us)
        step_us = math.ceil((end_us - base_us) / left)
    if slot_us - now_us > horizon * US:
        return Denial(slot_us / US, "budget")
    return slot_us / US, BudgetItem(item.spent + 1, base_us + step_us)


@runtime_checkable
class BudgetSource(Protocol):
    """A limiter whose table counts budgets (the DynamoDB limiter)."""

    def budgets(self) -> BudgetBook: ...


class BudgetBook:
    """The budgets' items on the limiter table, shared by every consumer using it."""

    def __init__(
        self, client: DynamoDBClient, table: str, *, clock: Callable[[], float] = time.time
    ) -> None:
        self._client = client
        self._table = table
        self._clock = clock
        self._lock = threading.Lock()  # a batch's threads take units one at a time
        self._seen: dict[str, BudgetItem] = {}  # per item, as this process last saw it
        self.writes = 0

    def take(self, key: str, rule: BudgetRule, horizon: float) -> BudgetSlot | Denial:
        """One unit of `key`'s budget for a call at its slot, or when to come back."""
        with self._lock:
            for _ in range(MAX_BUDGET_RACES):
                now = self._clock()
                item_key = rule.item_key(key, now)
                seen = self._seen.get(item_key, BudgetItem())
                got = next_slot(rule, seen, now, horizon)
                if isinstance(got, Denial):
                    return got
                slot_at, after = got
                current = self._write(item_key, seen, after, rule, now)
                if current is None:
                    if len(self._seen) >= MAX_ITEMS_SEEN:
                        self._seen.clear()  # past windows' items: a hint only, as any
                    self._seen[item_key] = after
                    return BudgetSlot(slot_at, item_key, after, seen.next_us)
                self._seen[item_key] = current
        return Denial(self._clock() + BUDGET_RACE_RETRY_SECONDS, "budget")

    def give_back(self, taken: BudgetSlot) -> None:
        """A unit taken for a call not made: back to its fixed window's count, and the line to
        where the take found it while no unit was taken after it (else what is left is spread
        again from the next take on); a rolling window's slot is only passed unused. One
        conditional write, two when a unit was taken since."""
        if taken.item_key.endswith("#rolling"):
            return
        last = {":last": n(taken.after.next_us), ":line": n(taken.line_us)}
        if not self._give(taken.item_key, "SET next_us = :line", "next_us = :last", last):
            self._give(taken.item_key, "", "spent > :none", {":none": n(0)})
        with self._lock:
            self._seen.pop(taken.item_key, None)  # its count changed: the next write learns it

    def _give(self, item_key: str, update: str, condition: str, values: dict[str, Any]) -> bool:
        """One unit off `item_key`'s count (and `update`) if `condition` holds: whether it did."""
        self.writes += 1
        written, _ = update_item(
            self._client,
            f"budget give-back failed for {item_key!r}",
            TableName=self._table,
            Key={"pk": {"S": item_key}},
            UpdateExpression=f"{update} ADD spent :less".strip(),
            ConditionExpression=condition,
            ExpressionAttributeValues={**values, ":less": n(-1)},
        )
        return written

    def spent(self, key: str, rule: BudgetRule) -> int:
        """Units taken in `key`'s current window (a consistent read)."""
        item_key = rule.item_key(key, self._clock())
        failure = f"budget read failed for {item_key!r}"
        return _item(get_item(self._client, self._table, item_key, failure)).spent

    def _write(
        self, item_key: str, seen: BudgetItem, after: BudgetItem, rule: BudgetRule, now: float
    ) -> BudgetItem | None:
        """Write `after` if the item is still `seen`: None when written, else the item now."""
        window = rule.window_of(now)
        end = now + rule.period_seconds if window is None else window[1]
        if seen == BudgetItem():
            condition = "attribute_not_exists(spent)"
            values: dict[str, Any] = {}
        else:
            condition = "spent = :spent AND next_us = :seen_next"
            values = {":spent": n(seen.spent), ":seen_next": n(seen.next_us)}
        self.writes += 1
        written, current = update_item(
            self._client,
            f"budget take failed for {item_key!r}",
            TableName=self._table,
            Key={"pk": {"S": item_key}},
            UpdateExpression="SET spent = :after, next_us = :next, expires_at = :ttl",
            ConditionExpression=condition,
            ExpressionAttributeValues={
                **values,
                ":after": n(after.spent),
                ":next": n(after.next_us),
                ":ttl": n(end + BUDGET_ITEM_KEPT_SECONDS),
            },
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
        return None if written else _item(current)


def _item(item: dict[str, Any]) -> BudgetItem:
    spent = int(item["spent"]["N"]) if "spent" in item else 0
    next_us = int(item["next_us"]["N"]) if "next_us" in item else 0
    return BudgetItem(spent, next_us)
