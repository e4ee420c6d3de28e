"""Run summaries over synthetic trajectories: every metric and its edges."""

from __future__ import annotations

import pytest
from eval_fakes import card_runs, traj

from ceiling.evaluate import card_stats, summarize


def test_all_pass_and_all_fail() -> None:
    good = [t for i in range(4) for t in card_runs(f"t/a-v1@s{i}-d1-train", ["solved"] * 4)]
    s = summarize(good)
    assert s["pass@1"]["value"] == 1.0 and s["pass@1"]["ci"] == [1.0, 1.0]
    assert s["pass@k"]["value"] == 1.0 and s["k"] == 4
    assert s["cards"] == 4 and s["episodes"] == 16 and s["outcomes"]["solved"] == 16
    bad = [t for i in range(4) for t in card_runs(f"t/a-v1@s{i}-d1-train", ["failed"] * 4)]
    s = summarize(bad)
    assert s["pass@1"]["value"] == 0.0 and s["pass@k"]["value"] == 0.0


def test_pass_at_k_averages_the_estimator_over_cards() -> None:
    trajs = (card_runs("t/a-v1@s0-d1-train", ["solved", "failed", "failed", "failed"])
             + card_runs("t/a-v1@s1-d1-train", ["failed"] * 4))
    s = summarize(trajs, k=2)
    # card 0: pass@1 = 1/4, pass@2 = 1 - C(3,2)/C(4,2) = 0.5; card 1: 0
    assert s["pass@1"]["value"] == pytest.approx(0.125)
    assert s["pass@k"]["value"] == pytest.approx(0.25)
    assert set(s["pass_curve"]) == {"1", "2"}
    lo, hi = s["pass@1"]["ci"]
    assert 0.0 <= lo <= 0.125 <= hi <= 0.25


def test_k_beyond_samples_drawn_is_an_error() -> None:
    trajs = card_runs("t/a-v1@s0-d1-train", ["solved", "solved"])
    with pytest.raises(ValueError, match="at least 3 samples"):
        summarize(trajs, k=3)
    with pytest.raises(ValueError):
        summarize([])


def test_infra_errors_never_count_against_the_model() -> None:
    trajs = card_runs("t/a-v1@s0-d1-train", ["solved", "infra_error"])
    trajs += card_runs("t/a-v1@s1-d1-train", ["infra_error", "infra_error"])
    s = summarize(trajs, k=1)
    assert s["pass@1"]["value"] == 1.0 and s["pass@1"]["n_cards"] == 1
    assert s["infra_errors"] == 3
    # pass@2 is only defined for cards with 2 valid samples: none here
    s2 = summarize(trajs, k=2)
    assert s2["pass@k"]["value"] is None and s2["pass@k"]["n_cards"] == 0


def test_horizon_type_recovery_boundary_and_gap() -> None:
    trajs = [
        traj("t/a-v1@s0-d1-train", outcome="solved", horizon="short"),
        traj("t/a-v1@s0-d1-heldout", outcome="failed", split="heldout", horizon="short"),
        traj("t/a-v1@s0-d1-fault", outcome="solved", faults=True),
        traj("t/a-v1@s0-d1-infeasible", outcome="abstained_correct", feasible=False),
        traj("t/b-v1@s0-d3-train", outcome="abstained_wrong", horizon="long", type="multi_tool"),
        traj("t/b-v1@s0-d3-infeasible", outcome="submitted" if False else "failed",
             horizon="long", type="multi_tool", feasible=False),
    ]
    s = summarize(trajs)
    assert s["by_horizon"]["long"]["value"] == 0.0
    assert s["by_horizon"]["short"]["value"] == pytest.approx(3 / 4)
    assert s["by_type"]["multi_tool"]["n_cards"] == 2
    assert s["recovery"]["value"] == 1.0 and s["recovery"]["n_cards"] == 1
    b = s["boundary"]
    assert b["correct_giveup"]["value"] == 0.5 and b["correct_giveup"]["n_cards"] == 2
    assert b["wrong_giveup_basis"] == "twins"
    assert b["wrong_giveup"]["value"] == 0.5 and b["wrong_giveup"]["n_cards"] == 2
    gap = s["heldout_gap"]
    assert gap["train"] == 0.5 and gap["heldout"] == 0.0 and gap["value"] == 0.5
    assert gap["ci"] is not None
    assert s["bootstrap"]["resamples"] == 1000


def test_no_twins_falls_back_to_all_feasible_and_empty_groups_are_none() -> None:
    s = summarize([traj("t/a-v1@s0-d1-train", outcome="abstained_wrong"), traj("x/y-v1")])
    assert s["boundary"]["wrong_giveup_basis"] == "all_feasible"
    assert s["boundary"]["wrong_giveup"]["value"] == 0.5
    assert s["boundary"]["correct_giveup"] == {"value": None, "ci": None, "n_cards": 0,
                                               "n_episodes": 0}
    assert s["recovery"]["value"] is None and s["heldout_gap"]["value"] is None


def test_cost_per_episode_and_unknown_outcome() -> None:
    trajs = [traj("t/a-v1@s0-d1-train", steps=4, tokens=20, seconds=2.0),
             traj("t/a-v1@s1-d1-train", steps=2, tokens=10, seconds=1.0)]
    s = summarize(trajs)
    assert s["per_episode"]["steps"]["value"] == 3.0
    assert s["per_episode"]["tokens"]["value"] == 15.0
    assert s["per_episode"]["seconds"]["value"] == 1.5
    weird = traj("t/a-v1@s2-d1-train", outcome="exploded")
    assert card_stats([weird])[0].outcomes["infra_error"] == 1


def test_summary_is_deterministic_for_a_seed() -> None:
    trajs = [t for i in range(6) for t in card_runs(f"t/a-v1@s{i}-d1-train",
                                                    ["solved", "failed"][: 1 + i % 2] * 2)]
    assert summarize(trajs, k=2, seed=1) == summarize(trajs, k=2, seed=1)


def test_infra_error_messages_are_counted_for_diagnosis() -> None:
    a = traj("t/a-v1@s0-d1-train", 0, "infra_error")
    a.error = "sandbox failed"
    b = traj("t/a-v1@s0-d1-train", 1, "infra_error")
    b.error = None
    b.verdict = {"outcome": "infra_error", "evidence": ["could not freeze"]}
    c = traj("t/a-v1@s0-d1-train", 2, "infra_error")
    c.error = "sandbox failed"
    s = summarize([a, b, c, traj("t/a-v1@s0-d1-train", 3)], k=1)
    assert s["infra_error_messages"] == [{"count": 2, "message": "sandbox failed"},
                                         {"count": 1, "message": "could not freeze"}]


def test_a_run_of_only_infra_errors_has_no_rates_and_still_renders() -> None:
    from ceiling.evaluate import render_report

    s = summarize(card_runs("t/a-v1@s0-d1-train", ["infra_error", "infra_error"]))
    assert s["pass@1"]["value"] is None and s["pass@k"]["value"] is None
    assert s["infra_errors"] == 2 and s["per_episode"]["steps"]["value"] is None
    html = render_report([{**s, "name": "broken"}])
    assert "2 of 2 episodes were infrastructure errors" in html and "n/a" in html
