"""The study's arithmetic: the saturating fit, the gain-per-doubling budget, the
hierarchical bootstrap over seeds and cards, the pass@k answer, and config errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ceiling._errors import ConfigError
from ceiling.study import PRESETS, fit_saturating, load_study, stop_budget, study_from_dict
from ceiling.study._analysis import card_counts, hierarchical, pass_k_verdict, per_card_values


def test_the_fit_recovers_a_known_saturating_curve_and_its_stop_budget() -> None:
    xs = [0, 16, 32, 64, 128, 256, 512]
    true = lambda x: 0.3 + 0.5 * x / (x + 40.0)
    fit = fit_saturating(xs, [true(x) for x in xs], threshold=0.01)
    assert fit is not None
    assert (fit.y0, fit.ymax) == (pytest.approx(0.3, abs=0.01), pytest.approx(0.8, abs=0.01))
    assert fit.x50 == pytest.approx(40.0, rel=0.03) and fit.rmse < 1e-3
    x = fit.stop_budget
    assert x is not None and x > 40 / math.sqrt(2)
    assert fit.gain_per_doubling(x) == pytest.approx(0.01, abs=1e-6)  # the definition
    assert fit.gain_per_doubling(x * 0.9) > 0.01 > fit.gain_per_doubling(x * 1.1)


def test_stop_budget_edge_cases_and_unidentified_fits() -> None:
    assert stop_budget(0.0, 10.0, 0.01) is None  # no gain at all
    assert stop_budget(0.02, 10.0, 0.05) == 0.0  # no doubling ever gains 0.05
    assert fit_saturating([0, 16], [0.1, 0.2]) is None  # two budgets cannot fix 3 parameters
    # a ladder still rising in a straight line places no bend: x50 runs to the grid's edge
    # and the asymptote past 1 (the default study's flat-within-noise GRPO curve did this)
    line = fit_saturating([0, 16, 32, 64], [0.38, 0.45, 0.52, 0.66])
    assert line is not None and not line.identified and line.stop_budget is None
    assert "edge of the search grid" in line.why and "outside [0, 1]" in line.why
    bent = fit_saturating([0, 16, 32, 64], [0.3 + 0.5 * x / (x + 20) for x in (0, 16, 32, 64)])
    assert bent is not None and bent.identified and bent.why == ""


def test_hierarchical_bootstrap_covers_seed_and_card_spread() -> None:
    rng = np.random.default_rng(0)
    mat = np.clip(rng.normal(0.5, 0.2, size=(3, 20)), 0, 1)
    h = hierarchical(mat, resamples=500)
    assert h["value"] == pytest.approx(float(mat.mean()))
    assert h["ci"][0] < h["value"] < h["ci"][1] and len(h["per_seed"]) == 3
    one = hierarchical(np.full((3, 5), 0.4), resamples=200)
    assert one["ci"] == [pytest.approx(0.4), pytest.approx(0.4)]
    spread = hierarchical(np.array([[0.0] * 5, [1.0] * 5]), resamples=500)
    assert spread["ci"][0] == 0.0 and spread["ci"][1] == 1.0  # the seeds disagree fully
    assert hierarchical(np.full((2, 3), np.nan))["value"] is None


def test_card_counts_and_diversity_of_successful_action_sequences() -> None:
    from ceiling.rollout import Trajectory, Turn
    from ceiling.verify._verdict import Outcome

    def t(cid: str, cmd: str, ok: bool, outcome: str | None = None) -> Trajectory:
        return Trajectory(episode_id="e", card_id=cid, card_hash="h", template="x/t",
                          type="x", horizon="short", difficulty=1, split="train",
                          feasible=True, faults=False, seed=0, sample=0, policy="p",
                          harness_fingerprint="f", sampling={}, passed=ok,
                          outcome=Outcome(outcome or ("solved" if ok else "failed")),
                          turns=[Turn(text=cmd, action={"tool": "run", "args": {"cmd": cmd}})])

    cards = card_counts([t("a", "cp x y", True), t("a", "cp x y", True), t("a", "cat x > y", True),
                         t("a", "rm y", False), t("a", "", False, "infra_error"),
                         t("b", "ls", False)])
    assert cards["a"] == {"n": 4, "c": 3, "distinct": 2, "template": "x/t", "infra": 1}
    assert cards["b"]["distinct"] == 0
    v = per_card_values(cards, "pass@k", 4, ["a", "b", "missing"])
    assert v[0] == 1.0 and math.isnan(v[1]) and math.isnan(v[2])  # b: 1 sample < k
    assert per_card_values(cards, "pass@1", 4, ["a", "b"]).tolist() == [0.75, 0.0]
    assert per_card_values(cards, "diversity", 4, ["a", "b"]).tolist() == [2.0, 0.0]


def test_the_pass_k_answer_follows_the_intervals() -> None:
    ch = lambda v, lo, hi: {"value": v, "ci": [lo, hi]}
    assert pass_k_verdict({"grpo": ch(-0.2, -0.3, -0.1), "es": ch(0.0, -0.1, 0.1)})[
        "answer"] == "yes"
    assert pass_k_verdict({"grpo": ch(0.0, -0.1, 0.1), "es": ch(0.0, -0.1, 0.1)})[
        "answer"].startswith("no")
    assert pass_k_verdict({"grpo": ch(0.0, -0.1, 0.1)})["answer"] == "not measured"


def test_study_config_errors_name_the_key_and_the_fix() -> None:
    good = PRESETS["tiny-test"]
    assert load_study("tiny-test").ladder == good["ladder"]
    with pytest.raises(ConfigError, match=r"unknown key 'ladr'.*'ladder'"):
        study_from_dict({**good, "ladr": [1]})
    with pytest.raises(ConfigError, match=r"not multiples of grpo's 2 rollouts"):
        study_from_dict({**good, "ladder": [3, 8]})
    with pytest.raises(ConfigError, match="strictly increasing"):
        study_from_dict({**good, "ladder": [8, 4]})
    with pytest.raises(ConfigError, match=r"optimizers.grpo.seed is set by the study"):
        study_from_dict({**good, "optimizers": {"grpo": {"seed": 3}}})
    with pytest.raises(ConfigError, match=r"group_sise"):
        study_from_dict({**good, "optimizers": {"grpo": {"group_sise": 3}}})
    with pytest.raises(ConfigError, match="does not exist"):
        load_study("nope.yaml")


def test_the_default_study_config_is_valid() -> None:
    from pathlib import Path

    cfg = load_study(Path(__file__).parents[2] / "examples" / "study_tiny.yaml")
    assert len(cfg.seeds) >= 3 and set(cfg.optimizers) == {"grpo", "es"} and cfg.eval.k >= 8
