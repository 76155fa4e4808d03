"""EventBridge Scheduler expressions, evaluated: when did (or will) a policy's schedule fire?

`sweeper catch-up` needs the scheduled times a pause let pass, and the local stack fires the
producer at the times the schedule names. Supported: `rate(N minute[s]|hour[s]|day[s])` and
`cron(minutes hours day-of-month month day-of-week year)` in the policy's time zone, with
EventBridge's dialect: `, - * / ?`, month and day names, day-of-week 1-7 from Sunday, `L` and `W`
in day-of-month (`L`, `LW`, `15W`), `L` and `#` in day-of-week (`6L`, `2#1`). One-time `at(...)`
schedules have no series to catch up on.

Written here because the maintained cron library for Python (croniter) speaks the Unix dialect:
day-of-week 0-6 from Sunday, no year field (a sixth field means seconds), no `LW` or `nL`, so
translating EventBridge expressions into it would be as long as evaluating them.

Around daylight-saving changes a local time that does not exist (spring forward) is taken at
the offset in force before the change, so it still fires once, shifted; a local time that
happens twice (fall back) fires once, at its first occurrence.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from sweeper.errors import ConfigError

#: A catch-up never releases more runs than this in one go: a wrong range is refused, not run.
MAX_OCCURRENCES = 10_000

_RATE_RE = re.compile(r"^rate\(\s*(\d+)\s+(minute|minutes|hour|hours|day|days)\s*\)$")
_CRON_RE = re.compile(r"^cron\((.+)\)$")
_UNIT_SECONDS = {"minute": 60, "hour": 3600, "day": 86_400}
_MONTHS = {name.upper(): i for i, name in enumerate(calendar.month_abbr) if name}
# EventBridge numbers days of the week 1-7 from Sunday.
_DAYS = {"SUN": 1, "MON": 2, "TUE": 3, "WED": 4, "THU": 5, "FRI": 6, "SAT": 7}

DayTest = Callable[[date], bool]


@dataclass(frozen=True, slots=True)
class RateSchedule:
    every: timedelta

    def occurrences(
        self, since: datetime, until: datetime, anchor: datetime | None
    ) -> list[datetime]:
        """Every `anchor + k * every` in [since, until]; the anchor defaults to `since`."""
        start = anchor or since
        step = self.every
        k = -((start - since) // step)  # the first k with start + k*step >= since
        first = start + k * step
        count = 0 if first > until else (until - first) // step + 1
        if count > MAX_OCCURRENCES:
            raise ConfigError(f"{count} scheduled runs in that range (at most {MAX_OCCURRENCES})")
        return [(first + i * step).astimezone(UTC) for i in range(count)]


@dataclass(frozen=True, slots=True)
class CronSchedule:
    minutes: frozenset[int]
    hours: frozenset[int]
    day: DayTest
    months: frozenset[int]
    years: frozenset[int] | None
    zone: ZoneInfo

    def occurrences(
        self, since: datetime, until: datetime, anchor: datetime | None = None
    ) -> list[datetime]:
        """Every time the expression names in [since, until], in order (UTC)."""
        found: list[datetime] = []
        day = since.astimezone(self.zone).date() - timedelta(days=1)  # DST can shift a day
        last = until.astimezone(self.zone).date() + timedelta(days=1)
        while day <= last:
            if (
                day.month in self.months
                and (self.years is None or day.year in self.years)
                and self.day(day)
            ):
                for hour in sorted(self.hours):
                    for minute in sorted(self.minutes):
                        local = datetime.combine(day, time(hour, minute), tzinfo=self.zone)
                        at = local.astimezone(UTC)
                        if since <= at <= until and (not found or at > found[-1]):
                            found.append(at)
                            if len(found) > MAX_OCCURRENCES:
                                raise ConfigError(
                                    f"more than {MAX_OCCURRENCES} scheduled runs in that range"
                                )
            day += timedelta(days=1)
        return found


Schedule = RateSchedule | CronSchedule


def parse_schedule(expression: str, timezone: str = "UTC") -> Schedule:
    """Parse a policy's schedule; ConfigError names what is wrong."""
    text = expression.strip()
    rate = _RATE_RE.match(text)
    if rate:
        amount = int(rate[1])
        if amount < 1:
            raise ConfigError(f"schedule {expression!r}: the rate must be at least 1")
        return RateSchedule(timedelta(seconds=amount * _UNIT_SECONDS[rate[2].rstrip("s")]))
    cron = _CRON_RE.match(text)
    if cron:
        try:
            return _parse_cron(cron[1].split(), ZoneInfo(timezone))
        except (ValueError, KeyError) as exc:
            raise ConfigError(f"schedule {expression!r}: {exc}") from exc
    if text.startswith("at("):
        raise ConfigError(f"schedule {expression!r} is one-time: there is no series to evaluate")
    raise ConfigError(f"schedule {expression!r} is not rate(...) or cron(...)")


def occurrences(
    expression: str,
    timezone: str,
    since: datetime,
    until: datetime,
    *,
    anchor: datetime | None = None,
) -> list[datetime]:
    """The scheduled times in [since, until] (aware datetimes), in order, in UTC.

    A rate() schedule fires every N units from when it was created; pass a time it fired at as
    `anchor` (the last recorded run), else the series starts at `since`.
    """
    if since.tzinfo is None or until.tzinfo is None:
        raise ConfigError("catch-up times must carry a time zone")
    if until < since:
        raise ConfigError("the end of the range is before its start")
    return parse_schedule(expression, timezone).occurrences(since, until, anchor)


# -- cron ---------------------------------------------------------------------------------------


def _parse_cron(fields: list[str], zone: ZoneInfo) -> CronSchedule:
    if len(fields) != 6:
        raise ValueError("cron needs six fields: minutes hours day-of-month month day-of-week year")
    minute, hour, dom, month, dow, year = (f.upper() for f in fields)
    if (dom == "?") == (dow == "?"):
        raise ValueError("exactly one of day-of-month and day-of-week must be '?'")
    day = _day_of_week(dow) if dom == "?" else _day_of_month(dom)
    return CronSchedule(
        minutes=_values(minute, 0, 59),
        hours=_values(hour, 0, 23),
        day=day,
        months=_values(month, 1, 12, _MONTHS),
        years=None if year in ("*", "?") else _values(year, 1970, 2199),
        zone=zone,
    )


def _number(text: str, names: dict[str, int] | None) -> int:
    if names is not None and text in names:
        return names[text]
    if not text.isdigit():
        raise ValueError(f"{text!r} is not a number")
    return int(text)


def _values(field: str, low: int, high: int, names: dict[str, int] | None = None) -> frozenset[int]:
    """A plain field (lists, ranges, steps, names) as the set of values it allows."""
    allowed: set[int] = set()
    for part in field.split(","):
        base, _, step_text = part.partition("/")
        step = int(step_text) if step_text else 1
        if step < 1:
            raise ValueError(f"step in {part!r} must be at least 1")
        if base in ("*", "?"):
            start, end = low, high
        elif "-" in base:
            first, _, second = base.partition("-")
            start, end = _number(first, names), _number(second, names)
        else:
            start = _number(base, names)
            end = high if step_text else start
        if not low <= start <= high or not low <= end <= high or start > end:
            raise ValueError(f"{part!r} is outside {low}-{high}")
        allowed.update(range(start, end + 1, step))
    return frozenset(allowed)


def _aws_weekday(day: date) -> int:
    return (day.weekday() + 1) % 7 + 1  # Monday is 0 in Python, 2 in EventBridge


def _last_day(day: date) -> int:
    return calendar.monthrange(day.year, day.month)[1]


def _nearest_weekday(day: date, target: int) -> int:
    """The weekday nearest the target day of the month, never leaving the month (`W`)."""
    target = min(target, _last_day(day))
    weekday = date(day.year, day.month, target).weekday()
    if weekday == 5:  # Saturday: Friday before, or Monday after if the 1st
        return target - 1 if target > 1 else target + 2
    if weekday == 6:  # Sunday: Monday after, or Friday before if the last day
        return target + 1 if target < _last_day(day) else target - 2
    return target


def _day_of_month(field: str) -> DayTest:
    if field == "L":
        return lambda d: d.day == _last_day(d)
    if field == "LW":
        return lambda d: d.day == _nearest_weekday(d, _last_day(d))
    if field.endswith("W"):
        target = _number(field[:-1], None)
        if not 1 <= target <= 31:
            raise ValueError(f"{field!r} is outside 1-31")
        return lambda d: d.day == _nearest_weekday(d, target)
    days = _values(field, 1, 31)
    return lambda d: d.day in days


def _day_of_week(field: str) -> DayTest:
    if field.endswith("L") and len(field) > 1:
        weekday = _number(field[:-1], _DAYS)
        return lambda d: _aws_weekday(d) == weekday and d.day + 7 > _last_day(d)
    if "#" in field:
        first, _, nth_text = field.partition("#")
        weekday, nth = _number(first, _DAYS), int(nth_text)
        if not 1 <= nth <= 5:
            raise ValueError(f"{field!r}: the occurrence must be 1-5")
        return lambda d: _aws_weekday(d) == weekday and (d.day - 1) // 7 + 1 == nth
    days = _values(field, 1, 7, _DAYS)
    return lambda d: _aws_weekday(d) in days
