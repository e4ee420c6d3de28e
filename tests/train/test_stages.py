"""Stage reward reliability on real small stages (real sandboxed episodes, real verifier).

The unreliable stage is a real mis-specification: ``abstain_wrong_reward: 1.0`` pays for
giving up on a feasible card, so the ``give_up_feasible`` exploit earns.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ceiling import ConfigError
from ceiling.train import StageConfig, check_stage_order, stage_reliability

COPY = "terminal_ops/demo-copy-v1"
EXPLOITS = ["delete_tests", "give_up_feasible"]


def test_a_sound_stage_is_fully_reliable_and_cached() -> None:
    good = StageConfig(name="good", templates=[COPY])
    r = stage_reliability(good, exploits=EXPLOITS, exploits_per_card=2)
    assert r.reliability == 1.0
    (row,) = r.templates
    assert (row.cards, row.oracle_solved, row.null_solved) == (1, 1, 0)
    assert row.exploit_runs == 2 and row.exploit_positive == 0 and row.infra_errors == 0
    assert sorted(row.exploits) == EXPLOITS and r.episodes == 4 and r.cached == 0
    again = stage_reliability(good, exploits=EXPLOITS, exploits_per_card=2)
    assert again.cached == 1 and again.episodes == 0 and again.reliability == 1.0


def test_an_exploitable_reward_spec_lowers_reliability_and_order_is_checked() -> None:
    good = StageConfig(name="good", templates=[COPY])
    bad = StageConfig(name="paid-to-quit", templates=[COPY],
                      reward={"abstain_wrong_reward": 1.0})  # type: ignore[arg-type]
    r = stage_reliability(bad, exploits=EXPLOITS, exploits_per_card=2)
    assert r.reliability == pytest.approx(0.5)
    assert r.templates[0].exploit_positive == 1
    assert "give_up_feasible" in r.templates[0].positives[0]
    warnings = check_stage_order([bad, good], exploits=EXPLOITS, exploits_per_card=2)
    assert len(warnings) == 1
    assert "'paid-to-quit'" in warnings[0] and "'good'" in warnings[0]
    assert check_stage_order([good, bad], exploits=EXPLOITS, exploits_per_card=2) == []


def test_order_check_with_given_reliabilities_and_bad_input(tmp_path: Path) -> None:
    a, b, c = (StageConfig(name=n, templates=[COPY]) for n in "abc")
    assert check_stage_order([a, b, c], [0.9, 0.95, 0.5]) == [
        w for w in check_stage_order([a, b, c], [0.9, 0.95, 0.5]) if "'a'" in w]
    assert len(check_stage_order([a, b, c], [0.9, 0.95, 0.5])) == 1
    assert check_stage_order([a, b], [0.9, 0.95], tolerance=0.1) == []
    with pytest.raises(ConfigError, match="empty task mix"):
        stage_reliability(StageConfig(name="e", tags=["no-such-tag"]))
    with pytest.raises(ConfigError, match="unknown exploit"):
        stage_reliability(a, exploits=["no_such_hack"])


def test_stages_command_prints_json(tmp_path: Path) -> None:
    import json

    from typer.testing import CliRunner

    from ceiling.cli import _load, app

    _load()
    cfg = tmp_path / "t.yaml"
    cfg.write_text(f"stages:\n  - name: one\n    templates: [{COPY}]\n"
                   f"  - name: two\n    templates: [{COPY}]\n")
    res = CliRunner().invoke(app, ["stages", str(cfg), "--json", "--exploits", "0"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert [s["stage"] for s in out["stages"]] == ["one", "two"] and out["warnings"] == []
    assert out["stages"][0]["reliability"] == 1.0 and out["stages"][1]["cached"] == 1
