"""The command line: envs validate on a card folder, redteam on one template, bench env,
and one-line errors for bad input."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from ceiling.cards import TaskCard, save_card
from ceiling.check import bench_env
from ceiling.cli import main

Make = Callable[..., TaskCard]


def cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as e:
        main(args)
    out = capsys.readouterr()
    return int(e.value.code or 0), out.out, out.err


def test_validate_card_folder_json(tmp_path: Path, make_files_card: Make, backend: str,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    folder = save_card(make_files_card(), tmp_path / "hello")
    rc, out, _ = cli(["envs", "validate", str(folder), "--repeats", "2", "--exploits", "2",
                      "--backend", backend, "--json"], capsys)
    rep = json.loads(out)
    assert rc == 0, rep
    assert (rep["cards"], rep["oracle_solved"], rep["null_solved"]) == (1, 1, 0)
    assert rep["flaky"] == [] and rep["exploit_runs"] == 2 and rep["exploit_max_reward"] <= 0


def test_validate_reports_a_broken_card(tmp_path: Path, make_files_card: Make, backend: str,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    card = make_files_card()
    card.solution = "echo wrong > out.txt\n"
    folder = save_card(card, tmp_path / "broken")
    rc, out, _ = cli(["envs", "validate", str(folder), "--repeats", "1", "--exploits", "0",
                      "--backend", backend], capsys)
    assert rc == 1
    assert "oracle solved 0/1" in out and "FAILED" in out


def test_redteam_one_template_json(backend: str, capsys: pytest.CaptureFixture[str]) -> None:
    from ceiling.envs import templates

    tid = templates()[0].template_id()
    rc, out, _ = cli(["redteam", "--family", tid, "--exploit", "conftest_report_patch",
                      "--exploit", "submit_immediately", "--backend", backend, "--json"], capsys)
    rep = json.loads(out)
    assert rc == 0 and rep["positive_total"] == 0
    assert set(rep["exploits"]) == {"conftest_report_patch", "submit_immediately"}
    row = rep["exploits"]["conftest_report_patch"]
    assert row["runs"] == 1 and row["max_reward"] == -1.0 and row["positive"] == 0


@pytest.mark.parametrize(("args", "needle"), [
    (["envs", "validate", "nope_family"], "unknown family"),
    (["redteam", "--exploit", "no_such_exploit", "--family", "terminal_ops"], "unknown exploit"),
    (["envs", "validate", "terminal_ops", "--backend", "docker"], "unknown backend"),
])
def test_bad_input_is_one_line_error(args: list[str], needle: str,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    rc, _out, err = cli(args, capsys)
    assert rc == 2 and needle in err and "Traceback" not in err


def test_bench_env_measures_verifier_against_bare_pytest(make_files_card: Make,
                                                         make_sandbox_card: Make,
                                                         backend: str) -> None:
    rep = bench_env([make_files_card(), make_sandbox_card()], backend=backend)
    assert rep["episodes"] == 2 and rep["outcomes"] == {"solved": 2}
    assert rep["bare_runs"] == 2 and rep["bare_pytest_s_mean"] > 0
    assert rep["verifier_s_mean"] > 0 and rep["verifier_overhead_ratio"] > 0
    assert rep["episodes_per_s"] > 0


def test_redteam_reports_by_class_and_exits_1_on_a_positive(
        backend: str, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from ceiling.tools import Action
    from ceiling.verify import ScriptPlan
    from ceiling.verify.exploits import EXPLOITS

    cheat = ScriptPlan("oracle_cheat", [lambda c: Action("run", {"cmd": c.solution})],
                       exploit_class="answer_guessing", applies_to=("terminal_ops/*",))
    monkeypatch.setitem(EXPLOITS, "oracle_cheat", cheat)
    rc, out, _ = cli(["redteam", "--family", "terminal_ops/demo-copy-v1", "--exploit",
                      "oracle_cheat", "--exploit", "submit_immediately", "--exploit",
                      "forbid_all", "--backend", backend, "--json"], capsys)
    rep = json.loads(out)
    assert rc == 1 and rep["positive_total"] == 1 and rep["runs"] == 2
    assert rep["exploits"]["oracle_cheat"]["class"] == "answer_guessing"
    assert rep["exploits"]["forbid_all"]["runs"] == 0  # applies to security fixes only
    row = rep["classes"]["answer_guessing"]
    assert row["plans"] == ["oracle_cheat", "submit_immediately"]
    assert (row["runs"], row["positive"], row["max_reward"]) == (2, 1, 1.0)
    assert row["outcomes"] == {"solved": 1, "failed": 1}
    assert rep["classes"]["interface_dodge"]["runs"] == 0
    rc, out, _ = cli(["redteam", "--family", "terminal_ops/demo-copy-v1", "--class",
                      "neutralise_tamper", "--backend", backend], capsys)
    assert rc == 0 and "neutralise_tamper" in out and "positive total: 0" in out
    assert "expected -1 but not hack_detected: 0" in out


def test_redteam_unknown_class_is_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    rc, _out, err = cli(["redteam", "--class", "nope"], capsys)
    assert rc == 2 and "unknown exploit class" in err and "Traceback" not in err


def test_validate_checks_every_card_of_a_folder(tmp_path: Path, backend: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    from ceiling.envs import make

    for i in range(21):  # more than the old silent limit of 20
        save_card(make("terminal_ops/demo-create-v1", seed=i), tmp_path / f"c{i:02d}")
    rc, out, _ = cli(["envs", "validate", str(tmp_path), "--repeats", "1", "--exploits", "0",
                      "--workers", "2", "--backend", backend, "--json"], capsys)
    rep = json.loads(out)
    assert rc == 0, rep["failures"]
    assert rep["cards"] == 21 and rep["oracle_solved"] == 21 and rep["folder_cards"] == 21
    assert rep["scope"] == "all 21 card folders" and rep["in_process"] == []
    rc, out, _ = cli(["envs", "validate", str(tmp_path), "--n", "2", "--repeats", "1",
                      "--exploits", "0", "--backend", backend], capsys)
    assert rc == 0 and "2 cards (the first 2 of 21 card folders (--n 2))" in out


def test_validate_lists_in_process_cards(tmp_path: Path, make_sandbox_card: Make,
                                         make_files_card: Make, backend: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    card = make_sandbox_card()
    card.acceptance.runner = "inprocess"
    save_card(card, tmp_path / "a")
    save_card(make_files_card(), tmp_path / "b")
    _rc, out, _ = cli(["envs", "validate", str(tmp_path), "--repeats", "1", "--exploits", "0",
                      "--backend", backend, "--json"], capsys)
    rep = json.loads(out)
    assert rep["cards"] == 2 and rep["in_process"] == [card.id], rep
    _rc, out, _ = cli(["envs", "validate", str(tmp_path), "--repeats", "1", "--exploits", "0",
                      "--backend", backend], capsys)
    assert f"in-process grading (workspace code shares the test process; hardened, not " \
           f"separated): 1/2 cards: {card.id}" in out
