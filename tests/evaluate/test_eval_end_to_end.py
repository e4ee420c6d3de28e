"""Must-show: eval scripted:oracle on terminal_ops -k 4 stores pass@1 = 1.0, scripted:null
gives 0.0, and compare / gate report the regression (gate exits non-zero). Real sandboxes,
real verifier, real store, through the command line."""

from __future__ import annotations

import json

import pytest

from ceiling.cli import main
from ceiling.evaluate import Store, load_trajectories

N_CARDS = "4"  # four templates, one of each variant (train, heldout, fault, infeasible)


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as e:
        main(argv)
    out, err = capsys.readouterr()
    return int(e.value.code or 0), out, err


@pytest.mark.slow
def test_oracle_vs_null_on_terminal_ops(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["eval", "--suite", "terminal_ops", "-k", "4", "--n", N_CARDS, "--workers", "4",
            "--json"]
    rc, out, err = _cli([*base, "--policy", "scripted:oracle", "--name", "oracle"], capsys)
    assert rc == 0, err
    s = json.loads(out)
    assert s["pass@1"]["value"] == 1.0 and s["pass@k"]["value"] == 1.0, s["outcomes"]
    assert s["k"] == 4 and s["cards"] == 4 and s["episodes"] == 16
    for field in ("run_id", "key", "outcomes", "by_horizon", "by_type", "recovery", "boundary",
                  "heldout_gap", "per_episode"):
        assert field in s, field
    assert s["pass@1"]["ci"] == [1.0, 1.0]
    assert s["infra_errors"] == 0, s["infra_error_messages"]

    rc, out, err = _cli([*base, "--policy", "scripted:null", "--name", "null"], capsys)
    assert rc == 0, err
    n = json.loads(out)
    assert n["pass@1"]["value"] == 0.0 and n["pass@k"]["value"] == 0.0
    assert n["key"] == s["key"]  # same cards, harness, sampling, versions: comparable

    store = Store()
    rec = store.get("oracle")
    assert len(store.episodes(rec.id)) == 16
    trajs = load_trajectories(rec.trajectories)
    assert len(trajs) == 16 and all(t.turns for t in trajs)

    rc, out, _ = _cli(["compare", "oracle", "null", "--json"], capsys)
    c = json.loads(out)
    assert rc == 0 and c["metrics"]["pass@1"]["delta"] == -1.0
    assert len(c["flipped"]["regressed"]) == 4
    rc, out, _ = _cli(["gate", "--baseline", "oracle", "--candidate", "null", "--max-drop",
                       "0.02"], capsys)
    assert rc != 0 and "pass@1 regressed" in out
