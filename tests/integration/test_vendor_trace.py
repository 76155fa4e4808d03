"""A vendor call shows in X-Ray by its URL's template, never by an id or a param it was filled
with (issue 40, point 7), recorded by the X-Ray SDK into an in-memory emitter.

Not a unit test: the calls go over loopback HTTP.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from aws_xray_sdk import global_sdk_config  # type: ignore[import-untyped]
from aws_xray_sdk.core import patch, xray_recorder  # type: ignore[import-untyped]
from aws_xray_sdk.core.context import Context  # type: ignore[import-untyped]
from aws_xray_sdk.ext.httplib import unpatch as unpatch_httplib  # type: ignore[import-untyped]

from sweeper import observability, runtime
from sweeper.actions.http import HttpAction
from sweeper.config import HttpActionConfig, Policy
from sweeper.models import ActionCall, OutcomeClass
from sweeper.observability import XRaySpans
from tests.integration.test_http_authority import AnswerServer
from tests.unit.test_url_authority import job_for

pytestmark = pytest.mark.integration

#: X-Ray's patchers for HTTP clients: each records every request's URL (its path, ids and all).
HTTP_CLIENT_PATCHES = frozenset({"httplib", "requests", "httpx", "aiohttp", "aiohttp_client"})
TENANT, OBJECT, PARAM = "tenant-5e1f", "object-9c2d", "param-7a3b"
TEMPLATE = "{api_url}/v1/tenants/{tenant_id}/objects/{object_id}?day={params.day}"


class MemoryEmitter:
    """The X-Ray SDK's emitter interface, keeping each entity's JSON instead of sending it."""

    daemon_address = "127.0.0.1:2000"

    def __init__(self) -> None:
        self.sent: list[str] = []

    def send_entity(self, entity: Any) -> None:
        self.sent.append(entity.serialize())

    def set_daemon_address(self, address: str) -> None:
        pass

    def subsegments(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        for entity in self.sent:
            found.extend(json.loads(entity).get("subsegments", []))
        return found


@pytest.fixture
def emitter() -> Iterator[MemoryEmitter]:
    """The global recorder (the one X-Ray's patches write to) on, into memory, with the
    functions' patches applied. botocore's is left out: it traces AWS API calls only (never a
    vendor URL) and cannot be undone, so it would trace every later test's AWS call."""
    memory = MemoryEmitter()
    was_enabled = global_sdk_config.sdk_enabled()
    previous = (xray_recorder.emitter, xray_recorder.sampling, xray_recorder.context)
    global_sdk_config.set_sdk_enabled(True)
    xray_recorder.configure(
        emitter=memory, sampling=False, context=Context(context_missing="IGNORE_ERROR")
    )
    patched = [module for module in observability.TRACED_MODULES if module != "botocore"]
    patch(patched)
    yield memory
    if "httplib" in patched:
        unpatch_httplib()
    emitter_, sampling, context = previous
    xray_recorder.configure(emitter=emitter_, sampling=sampling, context=context)
    global_sdk_config.set_sdk_enabled(was_enabled)


@pytest.fixture
def vendor() -> Iterator[AnswerServer]:
    server = AnswerServer(204)
    yield server
    server.close()


def traced_job(**params: Any) -> ActionCall:
    return job_for(TENANT, OBJECT, **params)


def test_no_http_client_is_patched_for_traces() -> None:
    assert not HTTP_CLIENT_PATCHES & set(observability.TRACED_MODULES)


def test_a_vendor_call_is_traced_by_its_template_never_its_values(
    emitter: MemoryEmitter, vendor: AnswerServer
) -> None:
    # Given an action whose calls are traced as the consumer traces them
    config = HttpActionConfig(api_url=vendor.url, allow_plain_http=True, url_template=TEMPLATE)
    action = HttpAction(config, spans=XRaySpans(xray_recorder))
    call = traced_job(day=PARAM)
    # When the call is made inside a traced invocation
    xray_recorder.begin_segment("consumer")
    result = action.perform(call)
    xray_recorder.end_segment()
    action.close()
    # Then its subsegment names the policy's action and carries the URL's template and status
    assert result.outcome is OutcomeClass.ACCEPTED
    assert vendor.seen[0][0] == f"/v1/tenants/{TENANT}/objects/{OBJECT}?day={PARAM}"
    (traced,) = [s for s in emitter.subsegments() if s["name"] == "exports http DELETE"]
    assert traced["namespace"] == "remote"
    assert traced["http"] == {
        "request": {"method": "DELETE", "url": TEMPLATE.replace("{api_url}", vendor.url)},
        "response": {"status": 204},
    }
    # And no id or param it was filled with is anywhere in what the trace holds
    recorded = "\n".join(emitter.sent)
    assert TENANT not in recorded
    assert OBJECT not in recorded
    assert PARAM not in recorded


def test_a_call_without_an_answer_is_traced_by_its_code_not_its_exception(
    emitter: MemoryEmitter,
) -> None:
    # Given a vendor that is not there (its exception would name the host and port)
    config = HttpActionConfig(api_url="http://127.0.0.1:9", allow_plain_http=True)
    action = HttpAction(config, spans=XRaySpans(xray_recorder))
    call = traced_job()
    xray_recorder.begin_segment("consumer")
    result = action.perform(call)
    xray_recorder.end_segment()
    (traced,) = [s for s in emitter.subsegments() if s["name"] == "exports http DELETE"]
    assert result.outcome is OutcomeClass.TRANSIENT
    assert traced["annotations"] == {"failure": result.code}
    assert traced.get("fault") is True
    assert "cause" not in traced
    assert OBJECT not in "\n".join(emitter.sent)


def test_an_unexpected_error_in_a_call_is_traced_by_its_type_never_its_message(
    emitter: MemoryEmitter,
) -> None:
    # Given a span around a call that fails in a way no code maps (its message names the object)
    spans = XRaySpans(xray_recorder)
    xray_recorder.begin_segment("consumer")
    # When the error leaves the span
    with (
        pytest.raises(RuntimeError),
        spans("exports http DELETE", method="DELETE", url_template="{api_url}/v1/objects/{id}"),
    ):
        raise RuntimeError(f"no route to http://vendor.example/v1/objects/{OBJECT}")
    xray_recorder.end_segment()
    # Then the subsegment holds a fault and the error's type, and nothing of its message
    (traced,) = [s for s in emitter.subsegments() if s["name"] == "exports http DELETE"]
    assert traced.get("fault") is True
    assert traced["annotations"] == {"failure": "RuntimeError"}
    assert OBJECT not in "\n".join(emitter.sent)


def test_an_http_client_call_in_a_traced_function_leaves_no_url_in_the_trace(
    emitter: MemoryEmitter, vendor: AnswerServer
) -> None:
    # Given a call through http.client (as a `python` action's callable might make one)
    request = urllib.request.Request(f"{vendor.url}/v1/objects/{OBJECT}", method="DELETE")
    # When it is made inside a traced invocation
    xray_recorder.begin_segment("consumer")
    with urllib.request.urlopen(request) as response:  # loopback, http only
        assert response.status == 204
    xray_recorder.end_segment()
    # Then the trace holds no URL of it
    assert OBJECT not in "\n".join(emitter.sent)


def test_the_consumers_action_traces_its_calls_on_the_functions_tracer(
    emitter: MemoryEmitter, vendor: AnswerServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the runtime's action, built while the functions' tracer is on
    monkeypatch.setattr(observability, "vendor_spans", lambda: XRaySpans(xray_recorder))
    policy = Policy(
        name="exports",
        action=HttpActionConfig(api_url=vendor.url, allow_plain_http=True, url_template=TEMPLATE),
    )
    monkeypatch.setenv("SWEEPER_POLICY", policy.model_dump_json())
    monkeypatch.setenv("SWEEPER_DATABASE_URL", "postgresql://unused@127.0.0.1/unused")
    runtime.reset()
    try:
        # When it calls the vendor in a traced invocation
        xray_recorder.begin_segment("consumer")
        assert runtime.action().perform(traced_job(day=PARAM)).outcome is OutcomeClass.ACCEPTED
        xray_recorder.end_segment()
    finally:
        runtime.reset()
    # Then the call is in the trace, by its template
    (traced,) = [s for s in emitter.subsegments() if s["name"] == "exports http DELETE"]
    assert traced["http"]["request"]["url"] == TEMPLATE.replace("{api_url}", vendor.url)
