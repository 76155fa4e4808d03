"""Job states, outcome classes, operation keys and the wire message."""

import itertools
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from sweeper.errors import IllegalTransitionError
from sweeper.models import (
    CALLABLE_STATUSES,
    MAX_ID_LENGTH,
    REFUSED_ID_CATEGORIES,
    TRANSITIONS,
    JobMessage,
    JobStatus,
    ObligationId,
    OutcomeClass,
    check_transition,
    id_problem,
    operation_key,
    sources_of,
)

_ID: TypeAdapter[str] = TypeAdapter(ObligationId)


def test_settled_states_never_move_except_an_operator_retry_or_cancel() -> None:
    assert {t for s, t in TRANSITIONS if s is JobStatus.SUCCEEDED} == set()
    assert {t for s, t in TRANSITIONS if s is JobStatus.FAILED} == {
        JobStatus.PENDING,
        JobStatus.CANCELLED,
    }


def test_cancelled_is_terminal_and_reached_from_every_unfinished_state() -> None:
    assert {t for s, t in TRANSITIONS if s is JobStatus.CANCELLED} == set()
    assert set(sources_of(JobStatus.CANCELLED)) == {
        JobStatus.PENDING,
        JobStatus.LEASED,
        JobStatus.HELD,
        JobStatus.FAILED,
    }


def test_a_held_job_leaves_only_by_unhold_cancel_or_a_call_already_under_way() -> None:
    assert {t for s, t in TRANSITIONS if s is JobStatus.HELD} == {
        JobStatus.PENDING,  # unhold
        JobStatus.CANCELLED,
        JobStatus.SUCCEEDED,
        JobStatus.FAILED,
    }
    assert JobStatus.HELD not in CALLABLE_STATUSES
    assert JobStatus.CANCELLED not in CALLABLE_STATUSES
    # a claim moves pending to leased, never held to leased
    assert (JobStatus.HELD, JobStatus.LEASED) not in TRANSITIONS


@given(st.lists(st.tuples(st.sampled_from(JobStatus), st.sampled_from(JobStatus)), max_size=40))
def test_check_transition_allows_exactly_the_table(
    moves: list[tuple[JobStatus, JobStatus]],
) -> None:
    for source, target in moves:
        if (source, target) in TRANSITIONS:
            check_transition(source, target)
        else:
            with pytest.raises(IllegalTransitionError):
                check_transition(source, target)


@given(st.lists(st.sampled_from(JobStatus), max_size=30))
def test_no_walk_through_the_table_leaves_cancelled_or_calls_a_held_job(
    wanted: list[JobStatus],
) -> None:
    # Given a job walking the state machine, taking each wanted move the table allows
    state = JobStatus.PENDING
    path = [state]
    for target in wanted:
        if (state, target) in TRANSITIONS:
            state = target
            path.append(state)
    # Then once cancelled it stays cancelled, and a held job is never leased (claimed) again
    # without an unhold (held -> pending) first
    if JobStatus.CANCELLED in path:
        assert set(path[path.index(JobStatus.CANCELLED) :]) == {JobStatus.CANCELLED}
    for before, after in itertools.pairwise(path):
        if before is JobStatus.HELD:
            assert after is not JobStatus.LEASED
    # and every state's sources, as the guarded UPDATEs take them, come from the table
    for status in JobStatus:
        assert all((s, status) in TRANSITIONS for s in sources_of(status))


def test_an_illegal_transition_raises_with_both_states() -> None:
    with pytest.raises(IllegalTransitionError) as err:
        check_transition(JobStatus.SUCCEEDED, JobStatus.LEASED)
    assert (err.value.source, err.value.target) == ("succeeded", "leased")


def test_only_accepted_absent_and_permanent_are_settled() -> None:
    assert {o for o in OutcomeClass if o.settled} == {
        OutcomeClass.ACCEPTED,
        OutcomeClass.ABSENT,
        OutcomeClass.PERMANENT,
    }


def test_the_operation_key_reads_plainly_for_plain_ids() -> None:
    assert operation_key("exports", "tenant-1", "file.csv", 3) == "exports:tenant-1:file.csv:v3"


IDS = st.text(min_size=1, max_size=12)


@given(a=st.tuples(IDS, IDS), b=st.tuples(IDS, IDS))
def test_different_objects_never_share_an_operation_key(
    a: tuple[str, str], b: tuple[str, str]
) -> None:
    if a != b:
        assert operation_key("p", *a, 1) != operation_key("p", *b, 1)


def test_a_message_of_an_unknown_schema_version_does_not_parse() -> None:
    body = JobMessage(
        key="k",
        policy="p",
        policy_version=1,
        tenant_id="t",
        object_id="o",
        scope="s",
        attempt=0,
        batch_id="b",
    ).to_body()
    assert JobMessage.model_validate_json(body).key == "k"
    with pytest.raises(ValueError, match="v"):
        JobMessage.model_validate_json(body.replace('"v":1', '"v":2'))


@pytest.mark.parametrize(
    ("value", "code"),
    [
        ("", "id_missing"),
        ("x" * (MAX_ID_LENGTH + 1), "id_too_long"),
        (".", "id_dot_segment"),
        ("..", "id_dot_segment"),
        (" x", "id_edge_whitespace"),
        ("x ", "id_edge_whitespace"),
        ("x\n", "id_edge_whitespace"),
        ("\u3000x", "id_edge_whitespace"),  # ideographic space
        ("x\x00y", "id_control_character"),
        ("x\x1by", "id_control_character"),  # escape: a terminal's colours in a log
        ("x\u200by", "id_control_character"),  # zero-width space (Cf)
        ("x\u202ey", "id_control_character"),  # right-to-left override (Cf)
        ("x\u2028y", "id_control_character"),  # line separator (Zl)
        ("x\ud800y", "id_control_character"),  # a lone surrogate: not UTF-8
    ],
)
def test_an_id_that_is_a_dot_segment_untrimmed_or_has_a_control_character_is_refused(
    value: str, code: str
) -> None:
    assert id_problem(value) == code
    with pytest.raises(ValidationError) as caught:
        _ID.validate_python(value)
    # pydantic's own checks come first for length and for a lone surrogate (string_unicode)
    assert caught.value.errors()[0]["type"] in (
        code,
        "string_too_short",
        "string_too_long",
        "string_unicode",
    )


@pytest.mark.parametrize("value", ["t1", "...", ".x", "a/b", "a b", "ünïcode", "x:y", "%2E%2E"])
def test_ordinary_ids_are_taken_exactly_as_given(value: str) -> None:
    assert id_problem(value) is None
    assert _ID.validate_python(value) == value


@settings(max_examples=200, deadline=None)
@given(st.text(st.characters(codec=None), max_size=MAX_ID_LENGTH + 2))
def test_an_id_is_accepted_exactly_when_the_rule_allows_it(value: str) -> None:
    allowed = (
        0 < len(value) <= MAX_ID_LENGTH
        and value not in (".", "..")
        and value == value.strip()
        and all(unicodedata.category(c) not in REFUSED_ID_CATEGORIES for c in value)
    )
    assert (id_problem(value) is None) is allowed
