"""GitHub's artifacts API as docs/examples/github-artifacts.toml calls it, served by the vendor
simulator beside its delete API: a hand-written contract after GitHub's published REST rate
limits, not derived from GitHub's code.

* `DELETE /repos/{owner}/{repo}/actions/artifacts/{artifact_id}` (percent-encoded parts,
  decoded) with `Authorization: Bearer ...`: 204 and one effect the first time, 404 once the
  artifact is gone or for one registered absent (`add_absent`); another method 405; no bearer
  token 401 (not counted);
* the primary limit, per owner (an installation's token): `core` calls a fixed window that
  starts at the owner's first call; every answer states it as GitHub does (`x-ratelimit-limit
  / -remaining / -used / -reset`, the reset an epoch time, `x-ratelimit-resource: core`); a
  call with nothing remaining is answered 403 with `x-ratelimit-remaining: 0`, without effect;
* the secondary limit, per owner: `secondary` points a sliding window, a mutation (DELETE)
  costing `mutation_cost`; a call that would pass it is answered 403 with `Retry-After` (the
  whole seconds until its points fit) and no effect, its points not charged;
* `throttle_next(owner=..., status=403|429)` (`POST /_github/throttle?[owner=O][&times=N]
  [&retry_after=N][&status=S]`): the next calls answered as the secondary limit answers,
  counted apart (`forced_at`); `add_absent` is `POST /_github/absent?owner=O&repo=R&id=A`;
  `spend(owner, calls)` (`POST /_github/spend?owner=O&calls=N`): another client of the same
  installation spends that many of the owner's primary window;
* `audit()` (`GET /_github_audit`): each counted call's arrival and points per owner, the 403s
  each limit caused, effects and calls per artifact.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections import Counter, deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import unquote

from sweeper_local.limit_dialects import limit_headers

ARTIFACTS_PATH_RE: Final = re.compile(r"^/repos/([^/]+)/([^/]+)/actions/artifacts/([^/]+)$")
#: What GitHub publishes: 5,000 calls an hour per installation (up to 15,000 on Enterprise
#: Cloud), and 900 points a minute for REST endpoints, a mutation costing 5.
DEFAULT_CORE: Final = (5000, 3600.0)
DEFAULT_SECONDARY: Final = (900, 60.0)
DEFAULT_MUTATION_COST: Final = 5
#: The controls of a simulator running as its own process (`control`).
CONTROL_PATHS: Final = frozenset({"/_github/throttle", "/_github/absent", "/_github/spend"})
PRIMARY_MESSAGE: Final = "API rate limit exceeded for installation."
SECONDARY_MESSAGE: Final = "You have exceeded a secondary rate limit."

Artifact = tuple[str, str, str]  # (owner, repo, artifact_id), decoded


@dataclass(frozen=True, slots=True)
class GithubAnswer:
    """What the API answers one call."""

    status: int
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes | None = None


@dataclass(frozen=True, slots=True)
class GithubAudit:
    """What the artifacts API saw. Artifacts are "owner/repo/id"; times are the simulator's
    `time.monotonic()` readings of every counted call, in arrival order."""

    calls_total: int
    responses_by_status: dict[int, int]
    #: 403s each limit caused ("primary", "secondary"), never an injected one.
    refused_by_limit: dict[str, int]
    #: The arrival times of the answers `throttle_next` injected.
    forced_at: list[float]
    effects_by_artifact: dict[str, int]
    calls_by_artifact: dict[str, int]
    arrivals_by_owner: dict[str, list[float]]
    #: (arrival, points) of every call the secondary limit charged, per owner.
    points_by_owner: dict[str, list[tuple[float, int]]]
    core: tuple[int, float]
    secondary: tuple[int, float]

    def most_points_in_a_window(self) -> int:
        """The most points any owner was charged in any window of the secondary's period."""
        period = self.secondary[1]
        best = 0
        for charged in self.points_by_owner.values():
            start = total = 0
            for at, points in charged:
                total += points
                while charged[start][0] <= at - period:
                    total -= charged[start][1]
                    start += 1
                best = max(best, total)
        return best

    def to_json(self) -> dict[str, Any]:
        data = {name: getattr(self, name) for name in self.__slots__}
        data["responses_by_status"] = {str(k): v for k, v in self.responses_by_status.items()}
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GithubAudit:
        fields = {**data}
        fields["responses_by_status"] = {
            int(k): int(v) for k, v in data["responses_by_status"].items()
        }
        fields["points_by_owner"] = {
            owner: [(float(at), int(points)) for at, points in charged]
            for owner, charged in data["points_by_owner"].items()
        }
        fields["core"] = (int(data["core"][0]), float(data["core"][1]))
        fields["secondary"] = (int(data["secondary"][0]), float(data["secondary"][1]))
        return cls(**fields)


@dataclass(frozen=True, slots=True)
class _Forced:
    owner: str | None  # None: any owner's call
    status: int
    retry_after_seconds: int


@dataclass(slots=True)
class _Core:
    """An owner's primary window: its start (epoch seconds) and the calls counted in it."""

    started: float
    used: int = 0


def _artifact(path: str) -> Artifact | None:
    match = ARTIFACTS_PATH_RE.match(path)
    if match is None:
        return None
    owner, repo, artifact = (unquote(part) for part in match.groups())
    return (owner, repo, artifact) if owner and repo and artifact else None


def _check_rate(name: str, rate: tuple[int, float]) -> tuple[int, float]:
    if rate[0] < 1 or not rate[1] > 0:
        raise ValueError(f"{name} must be (limit >= 1, period_seconds > 0)")
    return int(rate[0]), float(rate[1])


class GithubArtifacts:
    """The artifacts API's state, behind one lock (see the module docstring)."""

    def __init__(
        self,
        *,
        core: tuple[int, float] = DEFAULT_CORE,
        secondary: tuple[int, float] = DEFAULT_SECONDARY,
        mutation_cost: int = DEFAULT_MUTATION_COST,
    ) -> None:
        self.core = _check_rate("core", core)
        self.secondary = _check_rate("secondary", secondary)
        if not 1 <= mutation_cost <= self.secondary[0]:
            raise ValueError("mutation_cost must be at least 1, at most the secondary limit")
        self.mutation_cost = mutation_cost
        self._lock = threading.Lock()
        self._absent: set[Artifact] = set()
        self._clear()

    def _clear(self) -> None:
        self._deleted: set[Artifact] = set()
        self._cores: dict[str, _Core] = {}
        self._points: dict[str, deque[tuple[float, int]]] = {}
        self._charged: dict[str, list[tuple[float, int]]] = {}
        self._arrivals: dict[str, list[float]] = {}
        self._forced: list[_Forced] = []
        self._forced_at: list[float] = []
        self._responses: Counter[int] = Counter()
        self._refused: Counter[str] = Counter()
        self._effects: Counter[Artifact] = Counter()
        self._calls: Counter[Artifact] = Counter()
        self._calls_total = 0

    def reset(self) -> None:
        """Forget calls, windows, deletions and injected answers (absent artifacts stay)."""
        with self._lock:
            self._clear()

    def add_absent(self, owner: str, repo: str, artifact_id: str) -> None:
        """An artifact that never existed (or expired): its DELETE answers 404."""
        with self._lock:
            self._absent.add((owner, repo, artifact_id))

    def throttle_next(
        self,
        *,
        owner: str | None = None,
        times: int = 1,
        retry_after_seconds: int = 1,
        status: int = 403,
    ) -> None:
        """Answer the next `times` calls (of `owner`, if given) as the secondary limit does."""
        if status not in (403, 429):
            raise ValueError("GitHub refuses with 403 or 429")
        if times < 0 or retry_after_seconds < 0:
            raise ValueError("times and retry_after_seconds must not be negative")
        with self._lock:
            self._forced.extend([_Forced(owner, status, retry_after_seconds)] * times)

    def spend(self, owner: str, calls: int) -> None:
        """Another client of the owner's installation spends `calls` of its primary window."""
        if calls < 0:
            raise ValueError("calls must not be negative")
        with self._lock:
            epoch = time.time()
            core = self._cores.get(owner)
            if core is None or epoch >= core.started + self.core[1]:
                core = self._cores[owner] = _Core(epoch)
            core.used = min(self.core[0], core.used + calls)

    def control(self, path: str, params: Mapping[str, str]) -> int:
        """`POST /_github/throttle?[owner=O][&times=N][&retry_after=N][&status=S]`,
        `/_github/absent?owner=O&repo=R&id=A` or `/_github/spend?owner=O&calls=N`: the status
        to answer (400 for a control it cannot read)."""
        try:
            if path == "/_github/spend":
                self.spend(params["owner"], int(params["calls"]))
            elif path == "/_github/throttle":
                self.throttle_next(
                    owner=params.get("owner"),
                    times=int(params.get("times", "1")),
                    retry_after_seconds=int(params.get("retry_after", "1")),
                    status=int(params.get("status", "403")),
                )
            elif path == "/_github/absent":
                self.add_absent(params["owner"], params["repo"], params["id"])
            else:
                return 404
        except (KeyError, ValueError):
            return 400
        return 204

    def delete(self, method: str, path: str, authorization: str | None) -> GithubAnswer:
        """Decide one call to a `/repos/...` path as it arrives."""
        target = _artifact(path)
        with self._lock:
            now = time.monotonic()  # read under the lock so that arrivals stay in order
            self._calls_total += 1
            answer = self._decide(method, target, authorization, now, time.time())
            self._responses[answer.status] += 1
        return answer

    def _decide(
        self,
        method: str,
        target: Artifact | None,
        authorization: str | None,
        now: float,
        epoch: float,
    ) -> GithubAnswer:
        if target is None:
            return _message(404, "Not Found")
        if not (authorization or "").startswith("Bearer ") or len(authorization or "") < 8:
            return _message(401, "Requires authentication")
        owner = target[0]
        self._calls[target] += 1
        self._arrivals.setdefault(owner, []).append(now)
        core = self._cores.get(owner)
        if core is None or epoch >= core.started + self.core[1]:
            core = self._cores[owner] = _Core(epoch)
        stated = self._stated(core, epoch)
        forced = next((f for f in self._forced if f.owner in (None, owner)), None)
        if forced is not None:
            self._forced.remove(forced)
            self._forced_at.append(now)
            return _secondary(forced.status, forced.retry_after_seconds, stated)
        if core.used >= self.core[0]:
            self._refused["primary"] += 1
            return _message(403, PRIMARY_MESSAGE, stated)
        core.used += 1
        stated = self._stated(core, epoch)
        wait = self._charge(owner, now)
        if wait is not None:
            self._refused["secondary"] += 1
            return _secondary(403, max(1, math.ceil(wait)), stated)
        if method != "DELETE":
            return _message(405, "Method Not Allowed", stated)
        if target in self._absent or target in self._deleted:
            return _message(404, "Not Found", stated)
        self._deleted.add(target)
        self._effects[target] += 1
        return GithubAnswer(204, stated)

    def _stated(self, core: _Core, epoch: float) -> tuple[tuple[str, str], ...]:
        limit, period = self.core
        return limit_headers(
            "x-ratelimit",
            limit=limit,
            period_seconds=period,
            in_window=core.used,
            reset_seconds=core.started + period - epoch,
            now_epoch=epoch,
        )

    def _charge(self, owner: str, now: float) -> float | None:
        """Charge a mutation's points in the owner's sliding window; the seconds until they
        would fit when they do not (then nothing is charged)."""
        limit, period = self.secondary
        window = self._points.setdefault(owner, deque())
        while window and window[0][0] <= now - period:
            window.popleft()
        spent = sum(points for _, points in window)
        if spent + self.mutation_cost > limit:
            freed, wait = spent, 0.0
            for at, points in window:  # the oldest leave first
                freed -= points
                wait = at + period - now
                if freed + self.mutation_cost <= limit:
                    break
            return wait
        window.append((now, self.mutation_cost))
        self._charged.setdefault(owner, []).append((now, self.mutation_cost))
        return None

    def audit(self) -> GithubAudit:
        with self._lock:
            return GithubAudit(
                calls_total=self._calls_total,
                responses_by_status=dict(sorted(self._responses.items())),
                refused_by_limit=dict(self._refused),
                forced_at=list(self._forced_at),
                effects_by_artifact={"/".join(a): n for a, n in self._effects.items()},
                calls_by_artifact={"/".join(a): n for a, n in self._calls.items()},
                arrivals_by_owner={o: list(t) for o, t in self._arrivals.items()},
                points_by_owner={o: list(c) for o, c in self._charged.items()},
                core=self.core,
                secondary=self.secondary,
            )


def _message(status: int, message: str, headers: tuple[tuple[str, str], ...] = ()) -> GithubAnswer:
    return GithubAnswer(status, headers, json.dumps({"message": message}).encode())


def _secondary(
    status: int, retry_after_seconds: int, stated: tuple[tuple[str, str], ...]
) -> GithubAnswer:
    headers = (("Retry-After", str(retry_after_seconds)), *stated)
    return _message(status, SECONDARY_MESSAGE, headers)
