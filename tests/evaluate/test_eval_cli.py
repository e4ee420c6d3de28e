"""The compare / gate / report commands on stored synthetic runs: output, exit codes, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from eval_fakes import card_runs

from ceiling.cli import main
from ceiling.evaluate import Store, record_run

CARDS = [f"t/a-v1@s{i}-d1-train" for i in range(8)]


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as e:
        main(argv)
    out, err = capsys.readouterr()
    return int(e.value.code or 0), out, err


@pytest.fixture
def runs(tmp_path: Path) -> None:
    store = Store()
    for name, outcome, fp in (("base", "solved", "fp"), ("cand", "failed", "fp"),
                              ("other", "solved", "fp2")):
        trajs = [t for c in CARDS for t in card_runs(c, [outcome] * 2)]
        p = tmp_path / f"{name}.jsonl"
        p.write_text("".join(t.to_json() + "\n" for t in trajs))
        record_run(trajs, policy=f"scripted:{name}", suite="t", card_ids=CARDS,
                   harness_fingerprint=fp, sampling={"temperature": 1.0}, trajectories_path=p,
                   name=name, store=store)


def test_compare_and_gate_commands(runs: None, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _cli(["compare", "base", "cand", "--json"], capsys)
    c = json.loads(out)
    assert rc == 0 and c["metrics"]["pass@1"]["delta"] == -1.0
    assert len(c["flipped"]["regressed"]) == 8
    rc, out, _ = _cli(["compare", "base", "cand"], capsys)
    assert rc == 0 and "regressed: 8 cards" in out and "pass@1" in out
    rc, out, _ = _cli(["gate", "--baseline", "base", "--candidate", "cand", "--max-drop",
                       "0.02"], capsys)
    assert rc == 1 and "gate FAILED" in out and "pass@1 regressed" in out
    rc, out, _ = _cli(["gate", "--baseline", "base", "--candidate", "base", "--json"], capsys)
    assert rc == 0 and json.loads(out)["passed"] is True
    rc, out, _ = _cli(["gate", "--baseline", "base", "--candidate", "cand", "--metric",
                       "pass@k", "--json"], capsys)
    assert rc == 1 and json.loads(out)["checks"][0]["metric"] == "pass@2"


def test_bad_input_is_one_line_and_exit_2(runs: None, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = _cli(["compare", "base", "other"], capsys)
    assert rc == 2 and "differ in harness" in err and "--force" in err
    assert err.count("\n") == 1 and "Traceback" not in err
    rc, out, _ = _cli(["compare", "base", "other", "--force", "--json"], capsys)
    assert rc == 0 and json.loads(out)["forced"] is True
    rc, _, err = _cli(["gate", "--baseline", "base", "--candidate", "bsae"], capsys)
    assert rc == 2 and "did you mean 'base'" in err
    rc, _, err = _cli(["eval", "--policy", "scripted:oracle", "--suite", "nope_family",
                       "--name", "base"], capsys)
    assert rc == 2 and "already exists" in err


def test_report_command(runs: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "rep" / "report.html"
    rc, _, err = _cli(["report", "base", "cand", "other", "--out", str(out)], capsys)
    assert rc == 0 and out.is_file() and "report written" in err
    html = out.read_text()
    assert "cand vs base" in html and "other vs base" not in html
    assert "Not compared" in html and "differ in harness" in html


def test_every_command_has_help_with_an_example(capsys: pytest.CaptureFixture[str]) -> None:
    for cmd in ("eval", "compare", "gate", "report", "view"):
        rc, out, _ = _cli([cmd, "--help"], capsys)
        assert rc == 0 and "Example" in out, cmd


def test_eval_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = _cli(["eval", "--policy", "scripted:oracle", "--suite", "terminal_opz"], capsys)
    assert rc == 2 and "unknown family" in err
    rc, _, err = _cli(["eval", "--policy", "scripted:oracle", "--suite", "terminal_ops",
                       "-k", "0"], capsys)
    assert rc == 2 and "-k" in err
    rc, _, err = _cli(["eval", "--policy", "scripted:orcale", "--suite", "terminal_ops",
                       "--n", "1"], capsys)
    assert rc == 2 and "orcale" in err and "Traceback" not in err
    rc, _, err = _cli(["eval", "--policy", "scripted:oracle", "--suite", "terminal_ops",
                       "--n", "1", "--harness-format", "xml"], capsys)
    assert rc == 2 and "harness format" in err
    assert Store().list_runs() == []  # nothing stored for a failed command
