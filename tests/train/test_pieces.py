"""The band sampler, the demo statistics, the verdict cache and one real sandboxed step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ceiling.rollout import Trajectory
from ceiling.train import EVAL_SEED_BASE, Arm, BandSampler
from ceiling.train._demo_report import paired_diff, pass_curve, per_card, rates


def _t(card: str, passed: bool, template: str = "terminal_ops/demo-copy-v1",
       outcome: str | None = None) -> Trajectory:
    return Trajectory(episode_id=card, card_id=card, card_hash="h", template=template,
                      type="terminal_ops", horizon="short", difficulty=1, split="train",
                      feasible=True, faults=False, seed=0, sample=0, policy="p",
                      harness_fingerprint="f", sampling={},
                      outcome=outcome or ("solved" if passed else "failed"), passed=passed,
                      reward=float(passed))


def test_band_sampler_prefers_arms_in_the_productive_band() -> None:
    easy = Arm("terminal_ops/demo-create-v1", 1)
    mid = Arm("terminal_ops/demo-copy-v1", 1)
    s = BandSampler([easy, mid], low=0.1, high=0.9, explore=0.05, seed=1)
    s.update([_t("terminal_ops/demo-create-v1@s1-d1-train", True,
                 "terminal_ops/demo-create-v1")] * 30
             + [_t("terminal_ops/demo-copy-v1@s1-d1-train", i % 2 == 0) for i in range(30)])
    assert easy.rate > 0.9 and 0.1 < mid.rate < 0.9
    cards = s.draw(200)
    share = sum(c.template == mid.template for c in cards) / len(cards)
    assert share > 0.85
    assert all(c.seed is not None and c.seed < EVAL_SEED_BASE for c in cards)
    assert len({c.id for c in cards}) == len(cards)
    st = s.state_dict()
    again = BandSampler([Arm(easy.template, 1), Arm(mid.template, 1)], seed=99)
    again.load_state_dict(st)
    assert [c.id for c in again.draw(5)] == [c.id for c in s.draw(5)]


def test_paired_difference_and_pass_at_k() -> None:
    before = per_card([_t(f"c{i}", j < 1) for i in range(10) for j in range(4)])
    after = per_card([_t(f"c{i}", j < 3) for i in range(10) for j in range(4)])
    assert rates(before, 4) == {"pass@1": 0.25, "pass@4": 1.0}
    d = paired_diff(before, after, seed=0, resamples=500)
    assert d["value"] == pytest.approx(0.5) and d["excludes_zero"] and d["cards"] == 10
    flat = paired_diff(before, before, seed=0, resamples=500)
    assert flat["value"] == 0 and not flat["excludes_zero"]
    curve = pass_curve(before, 4)
    assert [round(y, 3) for _, y in curve] == [0.25, 0.5, 0.75, 1.0]
    infra = per_card([_t("x", False, outcome="infra_error"), _t("x", True)])
    assert infra["x"] == {"template": "terminal_ops/demo-copy-v1", "split": "train", "n": 1,
                          "c": 1, "infra": 1}


@pytest.mark.filterwarnings("ignore::ceiling.sandbox.LocalSandboxWarning")
def test_verdict_cache_reuses_identical_episodes_only() -> None:
    from ceiling.envs import make
    from ceiling.harness import HarnessConfig
    from ceiling.policies import load_policy
    from ceiling.rollout import run_episodes
    from ceiling.train import VerdictCache, cached_env_factory, pick_backend

    backend = pick_backend("namespace")[0]
    cache = VerdictCache()
    cards = [make("terminal_ops/demo-delete-v1", seed=3)]
    oracle = run_episodes(cards, load_policy("scripted:oracle"), HarnessConfig(format="line"),
                          k=3, backend=backend, progress=False, workers=1,
                          env_factory=cached_env_factory(cache))
    null = run_episodes(cards, load_policy("scripted:null"), HarnessConfig(format="line"),
                        k=1, backend=backend, progress=False, workers=1,
                        env_factory=cached_env_factory(cache))
    assert [t.outcome for t in oracle] == ["solved"] * 3
    assert null[0].outcome == "failed"
    assert cache.stats() == {"hits": 2, "misses": 2, "entries": 2}
    assert [bool(t.verdict["detail"].get("cached")) for t in oracle].count(True) == 2


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::ceiling.sandbox.LocalSandboxWarning")
def test_one_real_grpo_step_in_sandboxed_episodes(tmp_path: Path, tiny_tok: Any) -> None:
    """The default rollout path end to end: live model -> harness -> sandbox -> verifier ->
    GRPO update -> checkpoint (local backend; budgets cut to 2 steps to stay fast)."""
    from ceiling.cards import Budget
    from ceiling.train import config_from_dict
    from ceiling.train._trainer import Trainer, default_rollout

    from .conftest import make_model

    base = tmp_path / "base"
    make_model(tiny_tok, seed=5, lora=False).save_pretrained(base)
    tiny_tok.save_pretrained(base)

    def short(model: Any, tok: Any, cfg: Any, stage: Any, backend: str) -> Any:
        inner = default_rollout(model, tok, cfg, stage, backend)

        def run(cards: Any, k: int, seed: int) -> Any:
            cut = [c.model_copy(update={"budget": Budget(max_steps=2)}) for c in cards]
            return inner(cut, k, seed)
        return run

    cfg = config_from_dict({"base": str(base), "backend": "namespace", "group_size": 2,
                            "cards_per_step": 2, "workers": 2, "lora": {"r": 2, "alpha": 4},
                            "sampling": {"max_new_tokens": 6},
                            "stages": [{"name": "s", "tags": ["demo"], "steps": 1}]})
    s = Trainer(cfg, tmp_path / "run", rollout_factory=short).run()
    assert s.unit["rollouts"] == 4 and s.unit["env_steps"] >= 4
    assert s.unit["generated_tokens"] > 0 and s.checkpoint
    assert "groups_zero_variance" in s.last_metrics


def test_demo_report_renders_the_required_sections(tmp_path: Path) -> None:
    import json

    from ceiling.train import DemoConfig, demo_suite
    from ceiling.train._demo_report import per_template, render

    suite, held = demo_suite(2, 1)
    assert len(suite) == 14 and len(held) == 7
    assert all(c.seed is not None and c.seed >= EVAL_SEED_BASE for c in suite + held)
    assert {c.split for c in held} == {"heldout"}
    assert DemoConfig.for_base("smollm2").k < DemoConfig.for_base("tiny").k
    before = [_t(f"c{i}", j < 1) for i in range(6) for j in range(4)]
    after = [_t(f"c{i}", j < 3) for i in range(6) for j in range(4)]
    b, a = per_card(before), per_card(after)
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text("".join(json.dumps({"step": s, "pass_rate": s / 10,
                                           "unit": {"rollouts": 32 * s}}) + "\n"
                               for s in range(1, 6)))
    result = {
        "base": "tiny", "base_sha256": "ab" * 32, "backend": "namespace",
        "suite": {"cards": 6, "heldout_cards": 0, "k": 4},
        "before": rates(b, 4), "after": rates(a, 4), "diff": paired_diff(b, a),
        "pass_curve": {"before": pass_curve(b, 4), "after": pass_curve(a, 4)},
        "heldout_variant": {"before": rates({}, 4), "after": rates({}, 4),
                            "diff": paired_diff({}, {})},
        "per_template": per_template(b, a, 4),
        "training": {"steps": 5, "checkpoint": "x", "unit": {"rollouts": 160}},
        "verdict_cache": {"hits": 1, "misses": 2, "entries": 2}, "notes": ["a note"],
    }
    html = render(result, before, after, metrics)
    assert html.startswith("<!doctype html>") and "</html>" in html
    for needle in ("Learning curve", "pass@k before and after", "Per-template change",
                   "95% CI", "excludes", "<svg", "a note", "demo-copy-v1"):
        assert needle in html, needle


def test_stage_arms_from_a_task_mix_file(tmp_path: Path) -> None:
    from ceiling.train import StageConfig, stage_arms

    mix = tmp_path / "mix.yaml"
    mix.write_text("task_mix: {terminal_ops: 1.0}\n"
                   "templates: {include: ['terminal_ops/demo-*']}\n")
    arms = stage_arms(StageConfig(name="m", mix=str(mix)))
    assert {a.template for a in arms} == {f"terminal_ops/demo-{op}-v1" for op in
                                          ("create", "append", "copy", "move", "delete",
                                           "replace", "count")}
