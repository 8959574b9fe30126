"""The providers' batch APIs behind one interface, against stand-ins as strict as the real ones
(tests/serve/batch_standins*.py): a batch made, followed and read (answers, a request that fails
inside it, one over the judge's context, expired and cancelled requests), a batch an earlier attempt
made found instead of made twice, the stand-ins' own refusals, and the specs without a batch API."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from batch_standins import BatchOpenAI  # noqa: E402
from batch_standins_anthropic import BatchAnthropic  # noqa: E402

from esc_eval.serve.batches.providers import batch_transport  # noqa: E402
from esc_eval.serve.chat.interface import ChatMessage, ContextOverflowError, GenerationParams  # noqa: E402

JUDGE = "Rate the empathy. Give the score (The number only): "
PARAMS = GenerationParams(max_tokens=4)


def messages(i: int, long: bool = False) -> list[ChatMessage]:
    return [ChatMessage(role="system", content="You are a careful rater."),
            ChatMessage(role="user", content=JUDGE + ("word " * 400 if long else "") + f"dialogue {i}")]


def run_batch(transport, n: int, long: set[int] = frozenset(), name: str = "b1", polls: int = 10):
    lines = [json.dumps(transport.request_line(f"{name}-{i}", messages(i, i in long), PARAMS)).encode() for i in range(n)]
    record: dict = {}
    saved: list[dict] = []
    batch_id = transport.submit(name, transport.payload(lines), n, record,
                                lambda **f: (record.update(f), saved.append(dict(f))), set())
    for _ in range(polls):
        view = transport.retrieve(batch_id)
        if view.ended:
            break
    outcomes = {o.custom_id: o for o in transport.read_results(transport.results(view))}
    return batch_id, view, outcomes, record, saved


@pytest.fixture()
def openai(monkeypatch):
    srv = BatchOpenAI(key="sk-local").start()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local")
    monkeypatch.setenv("OPENAI_BASE_URL", srv.base_url + "/v1")
    yield srv
    srv.stop()


@pytest.fixture()
def anthropic(monkeypatch):
    srv = BatchAnthropic(key="ak-local").start()
    monkeypatch.setenv("ANTHROPIC_API_KEY", "ak-local")
    yield srv
    srv.stop()


def test_openai_batch_answers_and_says_why_a_request_failed(openai):
    openai.context = 150  # the long prompt is over it: HTTP 400 context_length_exceeded inside the batch
    openai.fail_lines = 1  # the first request run fails with a server error
    t = batch_transport("openai/gpt-4", {})
    batch_id, view, out, record, saved = run_batch(t, 4, long={3})
    assert view.status == "completed" and view.total == 4 and view.succeeded == 2 and view.failed == 2
    assert saved[0].keys() == {"file_id"} and {"create_started": True} in saved  # kept before the batch was made
    assert openai.created == [batch_id]
    answers = {cid: o.result.text for cid, o in out.items() if o.result is not None}
    assert len(answers) == 2 and all(a in "01234" for a in answers.values())
    assert isinstance(out["b1-3"].error, ContextOverflowError)
    failed = [o.error for cid, o in out.items() if cid != "b1-3" and o.error is not None]
    assert len(failed) == 1 and failed[0].kind == "transient" and "HTTP 500" in str(failed[0])
    body = json.loads(openai.files[record["file_id"]]["data"].splitlines()[0])["body"]
    assert body["max_tokens"] == 4 and body["model"] == "gpt-4"  # the body the online backend sends


def test_openai_expired_and_cancelled_requests_come_back_as_retryable_errors(openai):
    openai.expire_next, openai.expire_keep = 1, 1
    t = batch_transport("litellm/openai/gpt-4o-mini", {})
    _, view, out, _, _ = run_batch(t, 3)
    assert view.status == "expired"
    assert sum(o.result is not None for o in out.values()) == 1
    expired = [o.error for o in out.values() if o.error is not None]
    assert len(expired) == 2 and all(e.kind == "transient" and "batch_expired" in str(e) for e in expired)
    openai.polls = 100  # the next batch stays in progress until cancelled
    lines = [json.dumps(t.request_line(f"b2-{i}", messages(i), PARAMS)).encode() for i in range(2)]
    rec: dict = {}
    batch_id = t.submit("b2", t.payload(lines), 2, rec, rec.update, set())
    t.retrieve(batch_id)
    t.cancel(batch_id)
    for _ in range(3):
        view = t.retrieve(batch_id)
    assert view.status == "cancelled"
    out = list(t.read_results(t.results(view)))
    assert len(out) == 2 and all("batch_cancelled" in str(o.error) for o in out)


def test_openai_a_batch_an_earlier_attempt_made_is_found_not_made_again(openai):
    t = batch_transport("openai/gpt-4", {})
    lines = [json.dumps(t.request_line(f"b3-{i}", messages(i), PARAMS)).encode() for i in range(2)]
    record: dict = {}
    first = t.submit("b3", t.payload(lines), 2, record, record.update, set())
    # the process died after the create and before keeping the batch id: the record has the file and the start
    assert record["create_started"] and record["file_id"]
    again = dict(record)
    assert t.submit("b3", t.payload(lines), 2, again, again.update, set()) == first and again["found"]
    assert openai.created == [first]
    # without the payload (a record a crash left), the uploaded file is enough; a taken batch is not ours
    other = dict(record)
    assert t.submit("b3", None, 2, other, other.update, {first}) != first
    assert len(openai.created) == 2
    assert t.submit("b4", None, 2, {}, {}.update, set()) is None  # never sent: nothing to recover


def test_anthropic_batch_answers_errors_expiry_and_a_lost_create(anthropic):
    anthropic.context = 150
    anthropic.fail_lines = 1
    t = batch_transport("litellm/anthropic/claude-3-5-haiku-20241022", {"api_base": anthropic.base_url})
    batch_id, view, out, record, _ = run_batch(t, 4, long={3}, name="a1")
    assert view.status == "ended" and view.succeeded == 2 and view.failed == 2
    assert isinstance(out["a1-3"].error, ContextOverflowError)
    assert sum(o.result is not None for o in out.values()) == 2
    assert all(o.result.text in "01234" and o.result.prompt_tokens > 0 for o in out.values() if o.result)
    body = anthropic.executed.most_common(1)[0][0]
    assert json.loads(body)["system"] and "anthropic-version" not in body  # system at the top level, as LiteLLM sends it
    # the create happened, its answer was lost: the batch of the same size made since then is found
    lost = {"create_started_at": record["create_started_at"]}
    assert t.submit("a1", None, 4, lost, lost.update, set()) == batch_id and lost["found"]
    lost = {"create_started_at": record["create_started_at"]}
    assert t.submit("a1", None, 4, lost, lost.update, {batch_id}) is None
    anthropic.expire_next, anthropic.expire_keep = 1, 0
    _, view, out, _, _ = run_batch(t, 2, name="a2")
    assert all(o.error is not None and o.error.kind == "transient" and "expired" in str(o.error) for o in out.values())
    assert len(anthropic.created) == 2


def test_a_batch_the_provider_no_longer_has_is_ended_not_found(openai, anthropic):
    for t in (batch_transport("openai/gpt-4", {}),
              batch_transport("litellm/anthropic/claude-3-5-haiku-20241022", {"api_base": anthropic.base_url})):
        view = t.retrieve("batch_gone")
        assert view.ended and view.status == "not_found" and view.results == [] and "no longer" in view.error


def test_the_standins_refuse_what_the_providers_refuse(openai, anthropic):
    openai.max_requests = 2
    t = batch_transport("openai/gpt-4", {})
    _, view, out, _, _ = run_batch(t, 3)
    assert view.status == "failed" and "over the 2 maximum" in view.error and out == {}
    a = batch_transport("litellm/anthropic/claude-3-5-haiku-20241022", {"api_base": anthropic.base_url})
    bad = [json.dumps(a.request_line("not ok!", messages(0), PARAMS)).encode()]
    from esc_eval.serve.chat.interface import RunStopError

    with pytest.raises(RunStopError, match="anthropic batch API, create: HTTP 400: requests: custom_id must match"):
        a.submit("a3", a.payload(bad), 1, {}, {}.update, set())


@pytest.mark.parametrize("spec, options, words", [
    ("vllm/embedded", {}, "is no API model"),
    ("fake/judge", {}, "is no API model"),
    ("litellm/gemini/gemini-1.5-pro", {}, "no batch API for provider 'gemini'"),
    ("openai/judge", {"api": "vllm"}, "a server under api: vllm has no batch API"),
])
def test_a_spec_without_a_batch_api_is_one_line(spec, options, words):
    with pytest.raises(ValueError, match=words) as e:
        batch_transport(spec, options)
    assert "\n" not in str(e.value)
