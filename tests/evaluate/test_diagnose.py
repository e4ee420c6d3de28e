"""``ceiling diagnose``: the decision table on known card counts, the CLI on a stored run
and on real scripted episodes, and the section it adds to ``ceiling report``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from eval_fakes import card_runs

from ceiling.cli import main
from ceiling.evaluate import Store, card_stats, record_run
from ceiling.evaluate._diagnose import Thresholds, decide, diagnose_cards, format_table


def _cards(fam: str, horizon: str, n_cards: int, passing: int, k: int = 16,
           variant: str = "train", **kw: object) -> list:
    out = []
    for i in range(n_cards):
        cid = f"{fam}/{horizon}{i % 3}-v1@s{i}-d1-{variant}"
        out += card_runs(cid, ["solved"] * passing + ["failed"] * (k - passing),
                         horizon=horizon, **kw)
    return out


def _rows() -> dict[tuple[str, str], dict]:
    trajs = (_cards("alpha", "short", 8, 2)  # 2/16 per card: pass@16 ~ 1 >> pass@1 0.125
             + _cards("alpha", "long", 8, 0)  # never: a knowledge gap
             + _cards("beta", "short", 8, 16)  # always
             + _cards("beta", "long", 2, 4)  # too few cards
             + _cards("alpha", "short", 4, 8, variant="fault", faults=True)
             + [t for i in range(4) for t in card_runs(
                 f"alpha/short{i % 3}-v1@s{i}-d1-infeasible",
                 ["abstained_correct"] * 12 + ["failed"] * 4, feasible=False)])
    rows = diagnose_cards(card_stats(trajs), 16, resamples=300)
    return {(r["family"], r["horizon"]): r for r in rows}


def test_the_decision_table_gives_each_row_its_verdict_with_the_figures() -> None:
    rows = _rows()
    pt = rows[("alpha", "short")]
    assert pt["verdict"] == "post-train"
    assert pt["pass@1"]["value"] == pytest.approx(0.125)
    assert pt["pass@k"]["value"] == pytest.approx(1.0)
    assert pt["gap"]["ci"][0] > 0 and "capable but unactivated" in pt["why"]
    assert pt["recovery"]["value"] == pytest.approx(0.5) and pt["recovery"]["n_cards"] == 4
    assert pt["boundary"]["correct_giveup"]["value"] == pytest.approx(0.75)
    assert rows[("alpha", "long")]["verdict"] == "change the base"
    assert rows[("alpha", "long")]["pass@k"]["value"] == 0.0
    assert rows[("beta", "short")]["verdict"] == "saturated"
    nm = rows[("beta", "long")]
    assert nm["verdict"] == "not measurable" and "2 card(s)" in nm["why"]
    assert nm["recovery"]["value"] is None  # no fault card in that row
    table = format_table(list(rows.values()))
    assert "post-train" in table and "pass@16" in table.splitlines()[0]


def test_rows_between_the_rules_are_not_measurable() -> None:
    fig = lambda v, lo, hi: {"value": v, "ci": [lo, hi]}
    verdict, why = decide(fig(0.5, 0.3, 0.7), fig(0.55, 0.35, 0.75), fig(0.05, -0.02, 0.12), 10,
                          Thresholds())
    assert verdict == "not measurable" and "between" in why


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as e:
        main(argv)
    out, err = capsys.readouterr()
    return int(e.value.code or 0), out, err


def test_diagnose_reads_a_stored_run_and_report_includes_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trajs = _cards("alpha", "short", 8, 2) + _cards("beta", "short", 8, 16)
    p = tmp_path / "t.jsonl"
    p.write_text("".join(t.to_json() + "\n" for t in trajs))
    record_run(trajs, policy="scripted:x", suite="s", card_ids=sorted({t.card_id for t in trajs}),
               harness_fingerprint="fp", sampling={"temperature": 1.0}, trajectories_path=p,
               name="mixed", store=Store())
    rc, out, _ = _cli(["diagnose", "--run", "mixed", "--json"], capsys)
    rows = json.loads(out)
    assert rc == 0 and [(r["family"], r["verdict"]) for r in rows] == [
        ("alpha", "post-train"), ("beta", "saturated")]
    assert {"family", "horizon", "verdict", "pass@1", "pass@k", "recovery",
            "boundary"} <= set(rows[0])
    rc, _, _ = _cli(["report", "mixed", "--out", str(tmp_path / "r.html")], capsys)
    html = (tmp_path / "r.html").read_text()
    assert rc == 0 and "Diagnosis" in html and "post-train" in html


def test_diagnose_plays_real_episodes_and_names_bad_input(
        capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _cli(["diagnose", "--policy", "scripted:oracle", "--suite", "terminal_ops",
                         "--tags", "demo", "-k", "2", "--n", "4", "--json"], capsys)
    assert rc == 0, err
    (row,) = json.loads(out)
    assert (row["family"], row["verdict"]) == ("terminal_ops", "saturated")
    assert row["pass@1"]["value"] == 1.0 and row["episodes"] == 8
    rc, _, err = _cli(["diagnose", "--policy", "scripted:oracle"], capsys)
    assert rc == 2 and "--suite" in err
    rc, _, err = _cli(["diagnose", "--policy", "scripted:oracle", "--suite", "terminal_ops",
                       "--tags", "nope"], capsys)
    assert rc == 2 and "tags" in err


def test_diagnose_takes_the_sampling_flags(capsys: pytest.CaptureFixture[str]) -> None:
    from ceiling.evaluate import Store

    rc, _, err = _cli(["diagnose", "--policy", "builtin:tiny", "--suite", "terminal_ops",
                       "--tags", "demo", "-k", "2", "--temperature", "0"], capsys)
    assert rc == 2 and "--temperature" in err
    rc, out, err = _cli(["diagnose", "--policy", "builtin:tiny", "--suite", "terminal_ops",
                         "--tags", "demo", "-k", "2", "--n", "2", "--temperature", "0.7",
                         "--top-p", "0.9", "--max-new-tokens", "12", "--name", "diag-flags",
                         "--json"], capsys)
    assert rc == 0, err
    assert [r["family"] for r in json.loads(out)] == ["terminal_ops"]
    rec = Store().get("diag-flags")
    assert rec.key_parts["sampling"]["temperature"] == 0.7
    assert rec.key_parts["sampling"]["top_p"] == 0.9
    assert rec.key_parts["sampling"]["max_new_tokens"] == 12
