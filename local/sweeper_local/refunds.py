"""The refunds provider of docs/examples/refunds.toml, served by the vendor simulator: a
hand-written, Stripe-like contract (form bodies, idempotency keys, `Stripe-Should-Retry`), not
derived from any vendor's code.

* `POST /v1/refunds` with a bearer token (any; none: 401), an `Idempotency-Key` (none: 400)
  and an `application/x-www-form-urlencoded` body (another type, or a form that does not parse
  strictly: 400 `parameter_invalid`): `charge`, `amount` (positive whole cents) and
  `metadata[account]` (the connected account the call is for) required. A charge can be
  refunded up to its amount (`DEFAULT_CHARGE_CENTS`, or `add_charge`): 200 and one effect; a
  larger amount 400 `amount_too_large`; a charge with nothing left to refund 400
  `charge_already_refunded` (its code in the body's `error.code`);
* the same key again with the same form replays the first answer (`Idempotent-Replayed: true`,
  no effect); with another form 400 `idempotency_error` with `Stripe-Should-Retry: false`;
* per account (`metadata[account]`): a sliding window of `rate` calls, every arriving call
  counted, and at most `max_in_flight` calls held at once; a call over either is 429
  `rate_limit` (counted per cause), no effect;
* `lock(charge, times)`: that many calls 409 `lock_timeout` with `Stripe-Should-Retry: true`
  first; `fail(charge)`: every call 500 with `Stripe-Should-Retry: false` (no effect);
* each call takes `latency_seconds`; `audit()` (`GET /_refunds_audit`): calls and answers,
  effects and the form of each, the most calls held at once and the busiest window per account.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import parse_qsl

REFUNDS_PATH: Final = "/v1/refunds"
FORM_TYPE: Final = "application/x-www-form-urlencoded"
DEFAULT_CHARGE_CENTS: Final = 10_000
#: The provider's published limits per account: calls per second, and calls at once.
DEFAULT_RATE: Final = (100, 1.0)
DEFAULT_MAX_IN_FLIGHT: Final = 20
DEFAULT_LATENCY_SECONDS: Final = 0.05
SHOULD_RETRY: Final = "Stripe-Should-Retry"


@dataclass(frozen=True, slots=True)
class RefundAnswer:
    """What the provider answers one call: its status, headers and JSON body."""

    status: int
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class RefundsAudit:
    """What the refunds provider saw. Fields are as parsed from the form."""

    calls_total: int
    responses_by_status: dict[int, int]
    #: 429s by cause: "rate" or "in_flight".
    limited: dict[str, int]
    effects_by_charge: dict[str, int]
    #: The form of each charge's refund (the call that had the effect).
    forms_by_charge: dict[str, dict[str, str]]
    replays: int
    max_in_flight_by_account: dict[str, int]
    #: The most calls counted in any window of the rate's period, per account.
    busiest_window_by_account: dict[str, int]

    def to_json(self) -> dict[str, Any]:
        return {
            "calls_total": self.calls_total,
            "responses_by_status": {str(k): v for k, v in self.responses_by_status.items()},
            "limited": self.limited,
            "effects_by_charge": self.effects_by_charge,
            "forms_by_charge": self.forms_by_charge,
            "replays": self.replays,
            "max_in_flight_by_account": self.max_in_flight_by_account,
            "busiest_window_by_account": self.busiest_window_by_account,
        }


def _error(status: int, code: str, *, retry: bool | None = None) -> RefundAnswer:
    headers = () if retry is None else ((SHOULD_RETRY, "true" if retry else "false"),)
    body = json.dumps({"error": {"code": code, "type": "invalid_request_error"}}).encode()
    return RefundAnswer(status, body, headers)


def _form(content_type: str | None, body: bytes) -> dict[str, str] | None:
    """The form's fields, or None when it is not one form whose every key is given once."""
    if (content_type or "").split(";")[0].strip().lower() != FORM_TYPE:
        return None
    try:
        pairs = parse_qsl(body.decode("ascii"), keep_blank_values=True, strict_parsing=True)
    except (UnicodeDecodeError, ValueError):
        return None
    fields = dict(pairs)
    return fields if len(fields) == len(pairs) else None


def _cents(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() and int(text) > 0 else None


@dataclass
class _Account:
    arrivals: deque[float] = field(default_factory=deque)
    busiest: int = 0
    in_flight: int = 0
    max_in_flight: int = 0


class Refunds:
    """The refunds provider's state, behind one lock (see the module docstring)."""

    def __init__(
        self,
        *,
        rate: tuple[int, float] = DEFAULT_RATE,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        latency_seconds: float = DEFAULT_LATENCY_SECONDS,
    ) -> None:
        self._rate = rate
        self._max_in_flight = max_in_flight
        #: Seconds each admitted call takes (a test may change it between calls).
        self.latency_seconds = latency_seconds
        self._lock = threading.Lock()
        self._clear()

    def _clear(self) -> None:
        self._charges: dict[str, int] = {}
        self._refunded: Counter[str] = Counter()
        self._locked: Counter[str] = Counter()
        self._failing: set[str] = set()
        self._by_key: dict[str, tuple[dict[str, str], RefundAnswer]] = {}
        self._accounts: dict[str, _Account] = {}
        self._calls = 0
        self._statuses: Counter[int] = Counter()
        self._limited: Counter[str] = Counter()
        self._effects: Counter[str] = Counter()
        self._forms: dict[str, dict[str, str]] = {}
        self._replays = 0

    def reset(self) -> None:
        with self._lock:
            self._clear()

    def add_charge(self, charge: str, cents: int, *, refunded: int = 0) -> None:
        """A charge of `cents`, `refunded` of them already refunded."""
        with self._lock:
            self._charges[charge] = cents
            self._refunded[charge] = refunded

    def lock(self, charge: str, times: int) -> None:
        with self._lock:
            self._locked[charge] = times

    def fail(self, charge: str) -> None:
        with self._lock:
            self._failing.add(charge)

    def refund(
        self,
        headers: Mapping[str, str],
        body: bytes,
        wait: Callable[[float], object] = time.sleep,
    ) -> RefundAnswer:
        """Answer one `POST /v1/refunds` (`headers` by lower-case name), after the latency."""
        form = _form(headers.get("content-type"), body)
        account = (form or {}).get("metadata[account]", "")
        with self._lock:
            self._calls += 1
            answer = self._admit(headers, form, account)
            if answer is not None:
                self._statuses[answer.status] += 1
                return answer
            state = self._accounts[account]
            state.in_flight += 1
            state.max_in_flight = max(state.max_in_flight, state.in_flight)
        try:
            wait(self.latency_seconds)
            with self._lock:
                assert form is not None
                answer = self._decide(headers.get("idempotency-key", ""), form)
                self._statuses[answer.status] += 1
                return answer
        finally:
            with self._lock:
                self._accounts[account].in_flight -= 1

    def _admit(
        self, headers: Mapping[str, str], form: dict[str, str] | None, account: str
    ) -> RefundAnswer | None:
        if not headers.get("authorization", "").startswith("Bearer "):
            return _error(401, "api_key_missing", retry=False)
        if not headers.get("idempotency-key"):
            return _error(400, "idempotency_key_missing", retry=False)
        if form is None or not account:
            return _error(400, "parameter_invalid", retry=False)
        state = self._accounts.setdefault(account, _Account())
        now = time.monotonic()
        limit, period = self._rate
        state.arrivals.append(now)
        while state.arrivals and state.arrivals[0] <= now - period:
            state.arrivals.popleft()
        state.busiest = max(state.busiest, len(state.arrivals))
        if len(state.arrivals) > limit:
            self._limited["rate"] += 1
            return _error(429, "rate_limit")
        if state.in_flight >= self._max_in_flight:
            self._limited["in_flight"] += 1
            return _error(429, "rate_limit")
        return None

    def _decide(self, key: str, form: dict[str, str]) -> RefundAnswer:
        if key in self._by_key:
            first_form, first_answer = self._by_key[key]
            if first_form != form:
                return _error(400, "idempotency_error", retry=False)
            self._replays += 1
            return RefundAnswer(
                first_answer.status,
                first_answer.body,
                (*first_answer.headers, ("Idempotent-Replayed", "true")),
            )
        charge, cents = form.get("charge", ""), _cents(form.get("amount"))
        if not charge or cents is None:
            return _error(400, "parameter_invalid", retry=False)
        if self._locked[charge] > 0:
            self._locked[charge] -= 1
            return _error(409, "lock_timeout", retry=True)
        if charge in self._failing:
            return _error(500, "api_error", retry=False)
        left = self._charges.get(charge, DEFAULT_CHARGE_CENTS) - self._refunded[charge]
        if left <= 0:
            answer = _error(400, "charge_already_refunded")
        elif cents > left:
            answer = _error(400, "amount_too_large")
        else:
            self._refunded[charge] += cents
            self._effects[charge] += 1
            self._forms[charge] = form
            refund = {"id": f"re_{len(self._by_key) + 1}", "charge": charge, "amount": cents}
            answer = RefundAnswer(200, json.dumps(refund).encode())
        self._by_key[key] = (form, answer)
        return answer

    def audit(self) -> RefundsAudit:
        with self._lock:
            return RefundsAudit(
                calls_total=self._calls,
                responses_by_status=dict(self._statuses),
                limited=dict(self._limited),
                effects_by_charge=dict(self._effects),
                forms_by_charge={k: dict(v) for k, v in self._forms.items()},
                replays=self._replays,
                max_in_flight_by_account={k: a.max_in_flight for k, a in self._accounts.items()},
                busiest_window_by_account={k: a.busiest for k, a in self._accounts.items()},
            )
