"""Two limits on the wide limit's item: the paired block's one conditional write, the narrow keys'
gates it keeps, and its read (the block's plan is sweeper.limiter.paired's)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from sweeper.limiter.base import Denial, ScopeState
from sweeper.limiter.items import ITEM_TTL_SECONDS, MAX_RACES, US, ScopeItems, n, step_us
from sweeper.limiter.paired import (
    CLOSED_PREFIX,
    HOLES_ATTRIBUTE,
    NEXT_PREFIX,
    PRUNE_MARGIN_SECONDS,
    PRUNE_PER_WRITE,
    SAFE_ITEM_BYTES,
    Block,
    PairedItemFull,
    SharedItem,
    Want,
    grown_bytes,
    holes_value,
    item_bytes,
    plan_block,
    stale_keys,
)

logger = logging.getLogger(__name__)


class PairedWrites:
    """The paired blocks this process writes, planned from each wide item as it last saw it."""

    def __init__(self, items: ScopeItems) -> None:
        self._items = items
        self._shared: dict[str, SharedItem] = {}  # per wide key, its item as last seen

    def reserve(
        self,
        wide: str,
        wide_interval: float,
        wants: list[Want],
        horizon: float,
        span: float,
        most: int,
    ) -> tuple[dict[str, list[float]], Denial | None]:
        """A block of up to `most` slots of the wide limit `wide`, each also a slot of the
        narrow key it is given to (`wants`, the asking key first; their next free times are
        kept in `wide`'s item), in one conditional write (sweeper.limiter.paired).

        Returns the slots by narrow key (epoch seconds) and, when the asking key got none, its
        denial. Planned from the item as this process last saw it; a stale view costs a failed
        write, which returns the item, and the block is planned again. The write also removes
        a few keys whose times are past (`stale_keys`); raises PairedItemFull, without a write,
        when it would grow the item beyond SAFE_ITEM_BYTES.
        """
        wide_step = step_us(wide_interval)
        for _ in range(MAX_RACES):
            real = int(self._items.clock() * US)
            horizon_us = int(horizon * US)
            now = real + min(int(self._items.lead * US), horizon_us)
            seen = self._shared.get(wide, SharedItem())
            plan = plan_block(
                seen,
                wide_step,
                wants,
                real=real,
                now=now,
                horizon=horizon_us,
                span=int(span * US),
                most=most,
            )
            if isinstance(plan, Denial):
                return {}, plan
            cut = real - int(PRUNE_MARGIN_SECONDS * US)
            removed = stale_keys(seen, cut, set(plan.next_free), PRUNE_PER_WRITE)
            before = item_bytes(seen)
            after = grown_bytes(seen, set(plan.next_free), removed, plan.holes)
            if after > SAFE_ITEM_BYTES and after > before:
                logger.warning(
                    "paired item full; limits reserved one by one",
                    extra={"scope": wide, "code": "paired_item_full", "item_bytes": before},
                )
                raise PairedItemFull(f"the paired item of scope {wide!r} is full")
            failed = self._write_block(wide, seen, plan, now, removed, cut)
            if failed is None:
                by_key: dict[str, list[float]] = {}
                for key, slot in plan.slots:
                    by_key.setdefault(key, []).append(slot / US)
                return by_key, plan.asker
            self._shared[wide] = SharedItem.parse(failed)
        return {}, Denial(self._items.clock() + wide_interval, "rate")  # lost every race

    def _write_block(
        self,
        wide: str,
        seen: SharedItem,
        plan: Block,
        now: int,
        removed: list[str],
        cut: int,
    ) -> dict[str, Any] | None:
        """The block's compare-and-set; None when written, else the item as it is. It also
        writes the wide limit's holes after the block (covered by the version's condition) and
        removes the `removed` keys' attributes (stale as of `cut`, as `seen` holds them; a gate
        is removed only if it was not closed again since)."""
        names: dict[str, str] = {}
        values: dict[str, Any] = {
            ":tat": n(plan.tat),
            ":v": n(seen.version + 1),
            ":now": n(now),
            ":ttl": n(now // US + ITEM_TTL_SECONDS),
        }
        sets = ["tat = :tat", "v = :v", "expires_at = :ttl"]
        gates = ["(attribute_not_exists(closed_until) OR closed_until <= :now)"]
        for i, (key, free) in enumerate(sorted(plan.next_free.items())):
            names[f"#n{i}"], names[f"#c{i}"] = NEXT_PREFIX + key, CLOSED_PREFIX + key
            values[f":n{i}"] = n(free)
            sets.append(f"#n{i} = :n{i}")
            gates.append(f"(attribute_not_exists(#c{i}) OR #c{i} <= :now)")
        drops: list[str] = []
        if plan.holes or seen.holes:
            names["#h"] = HOLES_ATTRIBUTE
        if plan.holes:
            values[":h"] = holes_value(plan.holes)
            sets.append("#h = :h")
        elif seen.holes:
            drops.append("#h")
        for i, key in enumerate(removed):
            if key in seen.next_free:
                names[f"#rn{i}"] = NEXT_PREFIX + key
                drops.append(f"#rn{i}")
            if key in seen.closed:
                names[f"#rc{i}"] = CLOSED_PREFIX + key
                drops.append(f"#rc{i}")
                # close_narrow writes a gate without the version: keep one closed since.
                gates.append(f"(attribute_not_exists(#rc{i}) OR #rc{i} <= :cut)")
                values[":cut"] = n(cut)
        if seen.version:
            values[":seen"] = n(seen.version)
            values[":old"] = n(seen.tat)
            same = "v = :seen AND tat = :old"
        elif seen.has_tat:
            values[":old"] = n(seen.tat)
            same = "attribute_not_exists(v) AND tat = :old"
        else:
            same = "attribute_not_exists(v) AND attribute_not_exists(tat)"
        update = "SET " + ", ".join(sets)
        if drops:
            update += " REMOVE " + ", ".join(drops)
        result = self._items.update(
            wide,
            update,
            " AND ".join([same, *gates]),
            values,
            returns="NONE",
            names=names,
        )
        if isinstance(result, dict):
            return result
        gone = set(removed)
        self._shared[wide] = SharedItem(
            version=seen.version + 1,
            tat=plan.tat,
            closed_until=seen.closed_until,
            reason=seen.reason,
            next_free={
                **{k: t for k, t in seen.next_free.items() if k not in gone},
                **plan.next_free,
            },
            closed={k: t for k, t in seen.closed.items() if k not in gone},
            has_tat=True,
            holes=plan.holes,
        )
        return None

    def close_narrow(self, wide: str, key: str, until: float) -> None:
        """Close the narrow key `key`'s gate as the wide item keeps it (beside `close(key)`,
        which closes its own item): paired reservations then give it no slot until `until`."""
        self._items.update(
            wide,
            "SET #c = :u",
            "attribute_not_exists(#c) OR #c < :u",
            {":u": n(until * US)},
            returns="NONE",
            names={"#c": CLOSED_PREFIX + key},
        )

    def states(self, wide: str, keys: Sequence[str]) -> dict[str, ScopeState]:
        """The gates of every narrow key of `keys` (each both gates its paired call is under,
        `SharedItem.gate`) and the wide limit's own (under `wide`), in one read of the wide
        item, which holds them all (it also remembers the item: the next block is planned
        from it). A key the item does not hold is open as far as the item tells."""
        seen = SharedItem.parse(self._items.read(wide))
        self._shared[wide] = seen
        return {**{key: seen.gate(key) for key in keys}, wide: seen.wide_gate(wide)}
