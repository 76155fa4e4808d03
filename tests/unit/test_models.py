"""Job states, outcome classes, operation keys and the wire message."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sweeper.errors import IllegalTransitionError
from sweeper.models import (
    TRANSITIONS,
    JobMessage,
    JobStatus,
    OutcomeClass,
    check_transition,
    operation_key,
)


def test_settled_states_never_move_except_an_operator_retry() -> None:
    assert {t for s, t in TRANSITIONS if s is JobStatus.SUCCEEDED} == set()
    assert {t for s, t in TRANSITIONS if s is JobStatus.FAILED} == {JobStatus.PENDING}


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
