"""run_episodes on real cards and the real TaskEnv: batching, failures, seeds and resume."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from ceiling._errors import ConfigError, PolicyError
from ceiling.cards import TaskCard
from ceiling.harness import HarnessConfig
from ceiling.policies import Generation, PolicyRequest, SamplingParams, load_policy
from ceiling.rollout import RunStats, episode_seed, read_trajectories, run_episodes
from ceiling.tools import Action


def test_oracle_passes_and_null_fails(demo_cards: list[TaskCard], backend: str) -> None:
    cfg = HarnessConfig(format="line")
    good = run_episodes(demo_cards, load_policy("scripted:oracle"), cfg, backend=backend,
                        progress=False)
    assert [t.outcome for t in good] == ["solved", "solved", "solved", "abstained_correct"]
    assert all(t.passed and t.reward > 0 for t in good)
    t = good[0]
    assert t.harness_fingerprint == cfg.fingerprint() and t.policy == "scripted:oracle"
    assert t.episode_id == f"{demo_cards[0].id}#0" and t.seed == episode_seed(0, t.card_id, 0)
    assert t.turns[-1].action == {"tool": "submit", "args": {}} and t.terminated
    assert t.verdict["outcome"] == "solved" and t.timings["total_s"] > 0
    bad = run_episodes(demo_cards, load_policy("scripted:null"), cfg, backend=backend,
                       progress=False)
    assert [t.outcome for t in bad] == ["failed", "failed", "failed", "failed"]
    # the json format drives the same plans through its own renderer and parser
    js = run_episodes(demo_cards[2:], load_policy("scripted:oracle"), HarnessConfig(),
                      backend=backend, progress=False)
    assert [t.outcome for t in js] == ["solved", "abstained_correct"]
    assert js[0].turns[0].text.startswith('{"tool": "run"')


class _Recording:
    """Replies from a script per episode; records every batch it was sent."""

    spec = "test:recording"

    def __init__(self, script: Sequence[str], crash_on_call: int | None = None,
                 error_for: str | None = None) -> None:
        self.script = list(script)
        self.batches: list[int] = []
        self.crash_on_call = crash_on_call
        self.error_for = error_for

    def generate(self, requests: Sequence[PolicyRequest],
                 sampling: SamplingParams) -> list[Generation]:
        self.batches.append(len(requests))
        if self.crash_on_call is not None and len(self.batches) == self.crash_on_call:
            raise RuntimeError("GPU fell off the bus")
        out = []
        for r in requests:
            if r.context["card"].id == self.error_for:
                out.append(Generation(text="", finish_reason="error", error="request failed"))
                continue
            step = r.context["step"]
            out.append(Generation(text=self.script[min(step, len(self.script) - 1)]))
        return out


def test_one_batch_per_round_and_unparseable_replies_are_failed_steps(
        demo_cards: list[TaskCard], backend: str) -> None:
    pol = _Recording(["this is not a tool call", "run: ls", "submit"])
    trajs = run_episodes(demo_cards[:2], pol, HarnessConfig(format="line"), k=2,
                         backend=backend, progress=False, concurrency=3)
    assert pol.batches == [3, 3, 3, 1, 1, 1]  # live episodes share one batch per round
    for t in trajs:
        assert [x.parse_error is not None for x in t.turns] == [True, False, False]
        assert t.turns[0].observation.startswith("[error] not an action line")
        assert t.turns[0].action is None and t.outcome == "failed"


def test_policy_crash_marks_infra_error_and_the_run_goes_on(demo_cards: list[TaskCard],
                                                            backend: str) -> None:
    pol = _Recording(["submit"], crash_on_call=1)
    trajs = run_episodes(demo_cards[:3], pol, HarnessConfig(format="line"), backend=backend,
                         progress=False, concurrency=2)
    assert [t.outcome for t in trajs] == ["infra_error", "infra_error", "failed"]
    assert "GPU fell off the bus" in (trajs[0].error or "")
    pol2 = _Recording(["submit"], error_for=demo_cards[1].id)
    trajs = run_episodes(demo_cards[:3], pol2, HarnessConfig(format="line"), backend=backend,
                         progress=False)
    assert [t.outcome for t in trajs] == ["failed", "infra_error", "failed"]


def test_unreachable_endpoint_stops_the_run(demo_cards: list[TaskCard], backend: str) -> None:
    from ceiling.policies._serve import free_port

    pol = load_policy(f"openai:m@http://127.0.0.1:{free_port()}/v1", retries=0)
    with pytest.raises(PolicyError, match="not reachable"):
        run_episodes(demo_cards[:1], pol, backend=backend, progress=False)


def test_random_policy_replays_exactly(demo_cards: list[TaskCard], backend: str) -> None:
    def run() -> list[tuple[str, str]]:
        trajs = run_episodes(demo_cards[:1], load_policy("scripted:random"), backend=backend,
                             progress=False, seed=5)
        return [(x.text, x.observation) for t in trajs for x in t.turns]

    assert run() == run()
    assert episode_seed(5, "a", 0) != episode_seed(5, "a", 1) != episode_seed(6, "a", 0)


def test_resume_skips_finished_episodes_and_survives_a_torn_line(
        demo_cards: list[TaskCard], backend: str, tmp_path: Path) -> None:
    out = tmp_path / "run.jsonl"
    first = run_episodes(demo_cards[:2], load_policy("scripted:oracle"), k=2, backend=backend,
                         out=out, progress=False)
    lines = out.read_bytes().splitlines(keepends=True)
    assert len(lines) == 4
    # simulate a crash: two records finished, the third was cut mid-write
    out.write_bytes(lines[0] + lines[1] + lines[2][:40])
    pol = _Recording(['{"tool": "submit"}'])
    pol.spec = "scripted:oracle"  # same spec so the file is accepted
    st = RunStats()
    again = run_episodes(demo_cards[:2], pol, k=2, backend=backend, out=out, progress=False,
                         stats=st)
    assert st.skipped == 2 and st.episodes == 2 and sum(pol.batches) == 2
    ids = [json.loads(x)["episode_id"] for x in out.read_text().splitlines()]
    assert sorted(ids) == sorted(t.episode_id for t in first) and len(set(ids)) == 4
    assert [t.episode_id for t in again] == [t.episode_id for t in first]
    assert again[0].to_json() == first[0].to_json()
    assert len(read_trajectories(out)) == 4
    with pytest.raises(ConfigError, match="another policy"):
        run_episodes(demo_cards[:2], load_policy("scripted:null"), k=2, backend=backend,
                     out=out, progress=False)


def test_retry_infra_errors_on_resume(demo_cards: list[TaskCard], backend: str,
                                      tmp_path: Path) -> None:
    out = tmp_path / "run.jsonl"
    crash = _Recording(['{"tool": "submit"}'], crash_on_call=1)
    crash.spec = "scripted:oracle"
    (t,) = run_episodes(demo_cards[:1], crash, backend=backend, out=out, progress=False)
    assert t.outcome == "infra_error"
    kept = run_episodes(demo_cards[:1], load_policy("scripted:oracle"), backend=backend,
                        out=out, progress=False)
    assert kept[0].outcome == "infra_error"  # by default a resume does not redo anything
    (t,) = run_episodes(demo_cards[:1], load_policy("scripted:oracle"), backend=backend,
                        out=out, progress=False, retry_infra=True)
    assert t.outcome == "solved"
    assert len(out.read_text().splitlines()) == 2
    assert [x.outcome for x in read_trajectories(out)] == ["solved"]
    assert len(read_trajectories(out, latest=False)) == 2


def test_bad_arguments(demo_cards: list[TaskCard]) -> None:
    with pytest.raises(ConfigError, match="k=0"):
        run_episodes(demo_cards, load_policy("scripted:null"), k=0, progress=False)
    with pytest.raises(ConfigError, match="appears twice"):
        run_episodes([demo_cards[0], demo_cards[0]], load_policy("scripted:null"),
                     progress=False)


def test_hf_policy_records_tokens_and_logprobs(demo_cards: list[TaskCard], backend: str,
                                               tiny_model: Path) -> None:
    card = demo_cards[0].model_copy(deep=True)
    card.budget.max_steps = 2
    pol = load_policy(f"hf:{tiny_model}")
    sp = SamplingParams(temperature=1.0, max_new_tokens=8, seed=0)
    cfg = HarnessConfig(format="line", keep_prompts=True)
    (t,) = run_episodes([card], pol, cfg, sampling=sp, backend=backend, progress=False)
    assert t.outcome in ("failed", "truncated") and len(t.turns) >= 1
    for turn in t.turns:
        assert len(turn.token_ids) == len(turn.logprobs) > 0 and turn.prompt_token_ids
        assert turn.prompt is not None and turn.prompt.endswith("> ")
    assert t.sampling["stop"] == ["\n"] and t.tokens["completion"] > 0


def test_openai_policy_against_ceiling_serve_completes_a_suite(
        demo_cards: list[TaskCard], backend: str, tiny_model: Path) -> None:
    from ceiling.policies._hf import HFPolicy
    from ceiling.policies._serve import ServerThread, create_app

    cards = []
    for c in demo_cards:
        c = c.model_copy(deep=True)
        c.budget.max_steps = 2
        cards.append(c)
    app = create_app(HFPolicy(tiny_model), model_name="tiny")
    with ServerThread(app) as srv:
        pol = load_policy(f"openai:tiny@{srv.url}", concurrency=4)
        trajs = run_episodes(cards, pol, HarnessConfig(format="json", max_reply_tokens=16),
                             backend=backend, progress=False)
    app.state.batcher.close()
    assert len(trajs) == len(cards)
    # a random model does not solve anything, but every episode ran to a verdict over HTTP
    assert all(t.outcome in ("failed", "truncated") for t in trajs), [t.error for t in trajs]
    assert all(t.turns and t.turns[0].token_ids for t in trajs)
    assert all(t.turns[0].parse_error or t.turns[0].action for t in trajs)


def test_exploit_policies_run_through_the_harness(demo_cards: list[TaskCard],
                                                  backend: str) -> None:
    from ceiling.verify.exploits import EXPLOITS

    name = min(EXPLOITS)
    (t,) = run_episodes(demo_cards[:1], load_policy(f"scripted:exploit:{name}"),
                        HarnessConfig(format="line"), backend=backend, progress=False)
    assert t.outcome != "infra_error" and t.reward <= 0 and not t.passed
    assert t.instruction == demo_cards[0].instruction


def test_plan_history_counts_unparsed_turns() -> None:
    from ceiling.harness import Harness

    card = TaskCard(id="terminal_ops/x-v1", type="terminal_ops", horizon="short",
                    instruction="x")
    d = Harness(HarnessConfig(format="line")).start(card)
    d.add("garbage", None, "", error="bad")
    d.add("run: ls", Action("run", {"cmd": "ls"}), "a")
    hist = d.request().context["history"]
    assert [a.tool for a, _ in hist] == ["invalid", "run"]
