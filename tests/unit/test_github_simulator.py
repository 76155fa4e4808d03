"""The vendor simulator's GitHub artifacts API (sweeper_local.github_artifacts): its primary
limit per owner stated in `x-ratelimit-*` and refused with 403 when spent, its secondary limit
in points refused with 403 and `Retry-After`."""

from __future__ import annotations

import json

from sweeper_local.github_artifacts import SECONDARY_MESSAGE, GithubAnswer, GithubArtifacts

TOKEN = "Bearer ghs_test"


def _delete(api: GithubArtifacts, owner: str, artifact: int) -> GithubAnswer:
    return api.delete("DELETE", f"/repos/{owner}/ci/actions/artifacts/{artifact}", TOKEN)


def _header(answer: GithubAnswer, name: str) -> str | None:
    return dict(answer.headers).get(name)


def test_a_spent_primary_window_is_refused_with_403_and_nothing_remaining() -> None:
    # Given an owner's primary limit of 3 calls an hour
    api = GithubArtifacts(core=(3, 3600.0))
    # When it makes four calls
    answers = [_delete(api, "octo", n) for n in range(4)]
    # Then three delete, each stating what remains, and the fourth is refused without effect
    assert [a.status for a in answers] == [204, 204, 204, 403]
    assert [_header(a, "x-ratelimit-remaining") for a in answers] == ["2", "1", "0", "0"]
    assert _header(answers[3], "retry-after") is None
    audit = api.audit()
    assert audit.refused_by_limit == {"primary": 1}
    assert sum(audit.effects_by_artifact.values()) == 3
    # and another owner's window is its own
    assert _delete(api, "mona", 0).status == 204


def test_the_secondary_limit_refuses_a_mutation_past_its_points_with_a_wait() -> None:
    # Given 20 points a minute, a DELETE costing 5
    api = GithubArtifacts(secondary=(20, 60.0), mutation_cost=5)
    # When an owner deletes five artifacts at once
    answers = [_delete(api, "octo", n) for n in range(5)]
    # Then four are charged, and the fifth is refused with a retry-after and no effect
    assert [a.status for a in answers] == [204] * 4 + [403]
    refused = answers[4]
    assert refused.body is not None
    assert json.loads(refused.body)["message"] == SECONDARY_MESSAGE
    assert 59 <= int(_header(refused, "Retry-After") or "0") <= 60
    audit = api.audit()
    assert audit.refused_by_limit == {"secondary": 1}
    assert audit.most_points_in_a_window() == 20


def test_a_call_without_a_bearer_token_is_refused_and_not_counted() -> None:
    api = GithubArtifacts()
    answer = api.delete("DELETE", "/repos/octo/ci/actions/artifacts/1", None)
    assert answer.status == 401
    assert api.audit().arrivals_by_owner == {}


def test_another_clients_spend_leaves_only_what_remains() -> None:
    api = GithubArtifacts(core=(10, 3600.0))
    api.spend("octo", 9)
    assert _header(_delete(api, "octo", 1), "x-ratelimit-remaining") == "0"
    assert _delete(api, "octo", 2).status == 403
