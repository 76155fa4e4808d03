"""A urllib3 response as an `Answer` (`sweeper.actions.answer_match`): its status and headers,
and its body's first bytes when a rule or the limits' reader will read them, read against the
call's deadline; the outcome rules applied to it, and the limits it states read from it."""

from __future__ import annotations

import time

import urllib3

from sweeper.actions.answer_match import MAX_ANSWER_BODY_BYTES, Answer
from sweeper.actions.base import AnswerReader
from sweeper.actions.http_transport import read_chunks
from sweeper.actions.outcome_rules import OutcomeRules, RuledOutcome
from sweeper.vendor_reading import VendorReading


def ruled_and_read(
    rules: OutcomeRules,
    reader: AnswerReader | None,
    response: urllib3.BaseHTTPResponse,
    deadline: float,
    read_timeout: float,
) -> tuple[RuledOutcome | None, VendorReading | None]:
    """What `rules` make of `response` (None: no rule matches) and what it states of the
    vendor's limits (None: no reader); the answer is built once, its body read only when a
    rule for its status or the reader looks into it. Neither keeps a header's or the body's
    text."""
    if reader is None:
        return ruled_outcome(rules, response, deadline, read_timeout), None
    now = time.time()
    read_body = reader.reads_body or (bool(rules) and rules.reads_body(response.status))
    answer = answer_of(response, deadline, read_timeout, read_body=read_body)
    ruled = rules.classify(answer, now) if rules else None
    return ruled, reader.read(answer, now)


def ruled_outcome(
    rules: OutcomeRules, response: urllib3.BaseHTTPResponse, deadline: float, read_timeout: float
) -> RuledOutcome | None:
    """What the first of `rules` that matches makes of `response` (None: none matches); its
    body is read only when a rule for its status looks into it."""
    if not rules:
        return None
    read_body = rules.reads_body(response.status)
    return rules.classify(
        answer_of(response, deadline, read_timeout, read_body=read_body), time.time()
    )


def answer_of(
    response: urllib3.BaseHTTPResponse, deadline: float, read_timeout: float, *, read_body: bool
) -> Answer:
    """The answer's status and headers, with its body when `read_body` (None when longer than
    MAX_ANSWER_BODY_BYTES, trickled past `deadline` or broken: it then matches no path). What
    is not read here is left for `drop_body`."""
    body = read_capped(response, deadline, read_timeout) if read_body else None
    return Answer.of(response.status, dict(response.headers.itermerged()), body)


def read_capped(
    response: urllib3.BaseHTTPResponse, deadline: float, read_timeout: float
) -> bytes | None:
    """The whole body if it ends within MAX_ANSWER_BODY_BYTES and before `deadline`, else None.
    Read undecoded, as `drop_body` reads the rest (no Accept-Encoding is sent)."""
    chunks: list[bytes] = []

    def keep(chunk: bytes) -> bool:
        chunks.append(chunk)
        return sum(map(len, chunks)) <= MAX_ANSWER_BODY_BYTES

    if not read_chunks(response, deadline, read_timeout, keep):
        return None
    return b"".join(chunks)
