"""The openai policy over two real `ceiling serve` processes: spread, health, a killed one."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx
import pytest

from ceiling._errors import PolicyError
from ceiling.harness import HarnessConfig
from ceiling.policies import Generation, PolicyRequest, SamplingParams, load_policy
from ceiling.policies._openai import OpenAIPolicy, split_base_urls
from ceiling.policies._serve import free_port
from ceiling.rollout import RunStats, run_episodes


def _serve(model: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-c", "from ceiling.cli import main; main()", "serve", "--model",
         str(model), "--port", str(port), "--name", "tiny", "--device", "cpu"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=dict(os.environ,
                                                                    HF_HUB_OFFLINE="1"))
    return proc, f"http://127.0.0.1:{port}/v1"


def _wait_up(proc: subprocess.Popen[bytes], url: str) -> None:
    deadline = time.time() + 120
    while True:
        try:
            if httpx.get(url.removesuffix("/v1") + "/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        assert time.time() < deadline, "ceiling serve did not come up"
        time.sleep(0.3)


@pytest.fixture
def two_servers(tiny_model: Path) -> Iterator[list[tuple[subprocess.Popen[bytes], str]]]:
    servers = [_serve(tiny_model) for _ in range(2)]  # both load at once
    try:
        for proc, url in servers:
            _wait_up(proc, url)
        yield servers
    finally:
        for proc, _ in servers:
            if proc.poll() is None:
                proc.terminate()
            proc.wait(timeout=20)
            if proc.stderr is not None:
                proc.stderr.close()


def _backend() -> str:
    from ceiling._errors import SandboxError
    from ceiling.sandbox import LocalSandboxWarning, open_sandbox

    try:
        with open_sandbox([{}], backend="namespace") as sb:
            if sb.exec("true").exit_code == 0:
                return "namespace"
    except (SandboxError, OSError):
        pass
    warnings.simplefilter("ignore", LocalSandboxWarning)
    return "local"


class _KillBefore:
    """The policy, but ``proc`` is killed before batch ``n``."""

    def __init__(self, inner: OpenAIPolicy, proc: subprocess.Popen[bytes], n: int) -> None:
        self.inner, self.proc, self.n, self.calls = inner, proc, n, 0
        self.spec = inner.spec

    def generate(self, requests: Sequence[PolicyRequest],
                 sampling: SamplingParams) -> list[Generation]:
        self.calls += 1
        if self.calls == self.n:
            self.proc.kill()
            self.proc.wait(timeout=20)
        return self.inner.generate(requests, sampling)


@pytest.mark.slow
def test_requests_spread_and_a_suite_survives_a_killed_server(
        two_servers: list[tuple[subprocess.Popen[bytes], str]]) -> None:
    from ceiling.envs import make

    (p1, u1), (_p2, u2) = two_servers
    pol = load_policy(f"openai:tiny@{u1},{u2}", concurrency=2, retries=2, backoff_s=0.05,
                      cooldown_s=600)  # a killed endpoint stays marked down in this test
    assert isinstance(pol, OpenAIPolicy) and pol.base_urls == [u1, u2]
    gens = pol.generate([PolicyRequest(messages=[{"role": "user", "content": f"q{i}"}])
                         for i in range(8)], SamplingParams(max_new_tokens=4, seed=1))
    assert all(g.error is None and g.token_ids for g in gens)
    before = pol.endpoint_stats()
    assert before[u1]["served"] > 0 and before[u2]["served"] > 0  # spread over both
    assert before[u1]["served"] + before[u2]["served"] == 8
    cards = []
    for i, name in enumerate(["create", "copy", "count", "append"]):
        c = make(f"terminal_ops/demo-{name}-v1", seed=30 + i)
        c.budget.max_steps = 3
        cards.append(c)
    st = RunStats()
    killer = _KillBefore(pol, p1, 2)
    trajs = run_episodes(cards, killer, HarnessConfig(format="json", max_reply_tokens=16),
                         backend=_backend(), progress=False, stats=st, concurrency=4)
    assert killer.calls >= 2 and p1.poll() is not None
    assert len(trajs) == len(cards)
    assert all(t.outcome in ("failed", "truncated") for t in trajs), [t.error for t in trajs]
    after = pol.endpoint_stats()
    assert after[u1]["failures"] >= 1 and not after[u1]["healthy"]  # tried once, then skipped
    assert after[u2]["served"] > before[u2]["served"] + len(cards)  # took over the batches


def test_several_urls_in_a_spec_and_all_down_is_a_policy_error() -> None:
    a, b = f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}/v1"
    assert split_base_urls(f"{a}, {b},{a}") == [a + "/v1", b]
    with pytest.raises(PolicyError, match="http://"):
        split_base_urls("127.0.0.1:8000")
    pol = OpenAIPolicy("m", f"{a},{b}", retries=1, backoff_s=0.01, cooldown_s=0.01)
    with pytest.raises(PolicyError, match="none of the endpoints .* is reachable"):
        pol.generate([PolicyRequest(messages=[{"role": "user", "content": "x"}])] * 3,
                     SamplingParams())
    stats = pol.endpoint_stats()
    assert all(s["failures"] >= 1 and s["served"] == 0 for s in stats.values())
