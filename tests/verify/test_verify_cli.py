"""The command line: envs validate on a card folder, redteam on one template, bench env,
and one-line errors for bad input."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from ceiling.cards import TaskCard, save_card
from ceiling.cli import main
from ceiling.verify._bench import bench_env

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
