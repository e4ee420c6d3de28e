"""The openai policy against a real `ceiling serve` (and against misbehaving endpoints)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from ceiling._errors import PolicyError
from ceiling.cards import TaskCard
from ceiling.harness import Harness, HarnessConfig, ReplyError
from ceiling.policies import PolicyRequest, SamplingParams, load_policy
from ceiling.policies._openai import OpenAIPolicy
from ceiling.policies._serve import ServerThread, free_port


def _req(text: str = "hi") -> PolicyRequest:
    return PolicyRequest(messages=[{"role": "user", "content": text}])


def test_models_and_batched_completions(served_tiny: ServerThread) -> None:
    r = httpx.get(served_tiny.url + "/models")
    assert r.json()["data"][0]["id"] == "tiny"
    pol = load_policy(f"openai:tiny@{served_tiny.url}", concurrency=4)
    sp = SamplingParams(temperature=1.0, max_new_tokens=8, seed=1)
    gens = pol.generate([_req(f"q{i}") for i in range(6)], sp)
    assert len(gens) == 6
    for g in gens:
        assert g.error is None and g.finish_reason in ("stop", "length")
        assert 0 < len(g.token_ids) == len(g.logprobs) <= 8  # the `ceiling` extension field
        assert g.usage["completion_tokens"] == len(g.token_ids)


def test_server_rejects_bad_requests(served_tiny: ServerThread) -> None:
    url = served_tiny.url + "/chat/completions"
    assert httpx.post(url, json={"messages": []}).status_code == 422
    assert httpx.post(url, json={"model": "other", "messages": [{"role": "user",
                                                                 "content": "x"}]}).status_code == 404
    pol = load_policy(f"openai:wrong-model@{served_tiny.url}", retries=0)
    g = pol.generate([_req()], SamplingParams(max_new_tokens=2))[0]
    assert g.error is not None and "404" in g.error


def test_endpoint_down_is_a_policy_error() -> None:
    pol = OpenAIPolicy("m", f"http://127.0.0.1:{free_port()}", retries=1, backoff_s=0.01)
    with pytest.raises(PolicyError, match="not reachable.*ceiling serve"):
        pol.generate([_req(), _req()], SamplingParams())


class _Fake(BaseHTTPRequestHandler):
    mode = "slow"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        mode = type(self).mode
        if mode == "slow":
            time.sleep(1.0)
            body = b"{}"
        elif mode == "garbage":
            body = b"<html>not json</html>"
        elif mode == "long":
            body = json.dumps({"choices": [{"message": {"content": "x" * 50_000},
                                            "finish_reason": "length"}]}).encode()
        else:
            body = json.dumps({"no": "choices"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except OSError:
            pass

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def fake() -> Iterator[tuple[str, type[_Fake]]]:
    handler = type("H", (_Fake,), {})
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1", handler
    srv.shutdown()
    srv.server_close()


def test_slow_endpoint_times_out_per_request(fake: tuple[str, type[_Fake]]) -> None:
    url, h = fake
    h.mode = "slow"
    pol = OpenAIPolicy("m", url, timeout_s=0.2, retries=1, backoff_s=0.01)
    g = pol.generate([_req()], SamplingParams())[0]
    assert g.error is not None and "did not answer within 0.2 s" in g.error


@pytest.mark.parametrize("mode", ["garbage", "shape"])
def test_invalid_reply_is_a_request_error(fake: tuple[str, type[_Fake]], mode: str) -> None:
    url, h = fake
    h.mode = mode
    g = OpenAIPolicy("m", url, retries=0).generate([_req()], SamplingParams())[0]
    assert g.error is not None and "invalid response" in g.error


def test_too_long_reply_is_a_failed_step(fake: tuple[str, type[_Fake]]) -> None:
    url, h = fake
    h.mode = "long"
    g = OpenAIPolicy("m", url, retries=0).generate([_req()], SamplingParams())[0]
    assert g.error is None and g.finish_reason == "length"
    card = TaskCard(id="terminal_ops/x-v1", type="terminal_ops", horizon="short",
                    instruction="x")
    dialogue = Harness(HarnessConfig()).start(card)
    with pytest.raises(ReplyError, match="too long"):
        dialogue.parse(g.text, finish_reason=g.finish_reason)
