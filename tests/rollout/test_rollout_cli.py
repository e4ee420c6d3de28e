"""`ceiling bench rollout` and `ceiling serve` through the command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

import ceiling.cli.rollout_cmds  # noqa: F401 - registers the commands
from ceiling._errors import ConfigError, PolicyError
from ceiling.cli._app import app
from ceiling.policies._serve import free_port


def test_bench_rollout_json(backend: str) -> None:
    res = CliRunner().invoke(app, ["bench", "rollout", "--json", "--cards", "2", "--no-ray",
                                   "--concurrency", "1,2", "--backend", backend])
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    assert rep["bench"] == "rollout" and set(rep["concurrency"]) == {"1", "2"}
    for lvl in rep["concurrency"].values():
        assert lvl["episodes"] == 2 and lvl["passed"] == 2 and lvl["infra_errors"] == 0
        assert 0.0 <= lvl["outside_policy_share"] <= 1.0 and lvl["episodes_per_s"] > 0
    ps = rep["per_step"]
    assert ps["harness_ms"] > 0 and ps["bare_exec_ms"] > 0 and ps["env_step_ms"] > 0
    assert rep["concurrency"]["1"]["speedup_vs_1"] == 1.0


@pytest.mark.parametrize("args,msg", [
    (["bench", "rollout", "--concurrency", "1,x"], "not a list of integers"),
    (["bench", "rollout", "--backend", "docker"], "unknown backend"),
    (["bench", "rollout", "--format", "xml"], "unknown harness format"),
])
def test_bench_rollout_bad_options(args: list[str], msg: str) -> None:
    res = CliRunner().invoke(app, args)
    assert isinstance(res.exception, ConfigError) and msg in str(res.exception)


def test_serve_missing_model_is_a_clear_error(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["serve", "--model", str(tmp_path / "nope")])
    assert isinstance(res.exception, PolicyError) and "does not exist" in str(res.exception)


@pytest.mark.slow
def test_serve_command_answers_over_http(tiny_model: Path) -> None:
    port = free_port()
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    proc = subprocess.Popen(
        [sys.executable, "-c", "from ceiling.cli import main; main()", "serve", "--model",
         str(tiny_model), "--port", str(port), "--name", "tiny", "--device", "cpu"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.time() + 90
        while True:
            try:
                if httpx.get(base + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            assert time.time() < deadline, "ceiling serve did not come up"
            time.sleep(0.3)
        assert httpx.get(base + "/v1/models").json()["data"][0]["id"] == "tiny"
        r = httpx.post(base + "/v1/chat/completions", timeout=30, json={
            "model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4})
        body = r.json()
        assert r.status_code == 200 and body["choices"][0]["message"]["role"] == "assistant"
        assert 0 < body["usage"]["completion_tokens"] <= 4
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
