"""``ceiling synth repo`` end to end on the vendored fixture project (namespace sandboxes,
the real in-process grader and :func:`ceiling.check.validate`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ceiling.cards import load_card
from ceiling.sandbox import namespaces_available
from ceiling.synth import RepoOptions, synth_repo

FIXTURE = Path(__file__).parent / "fixtures" / "minicalc"

pytestmark = pytest.mark.skipif(namespaces_available() is not None,
                                reason="needs the namespace sandbox")


def test_repo_cards_validate_and_resume(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    from ceiling.cli import main

    out = tmp_path / "cards"
    with pytest.raises(SystemExit) as e:
        main(["synth", "repo", str(FIXTURE), "--out", str(out), "--limit", "2",
              "--max-candidates", "9", "--combo-share", "0", "--json"])
    got = capsys.readouterr()
    assert not e.value.code, got.err
    rep = json.loads(got.out)
    assert rep["baseline"]["stable"] == 10 and rep["baseline"]["flaky"] == 0
    assert 1 <= rep["cards"] <= 3 and rep["candidates"] >= rep["cards"]
    assert sum(rep["refusals"].values()) == rep["candidates"] - rep["cards"]
    lines = [json.loads(x) for x in (out / "manifest.jsonl").read_text().splitlines()]
    assert len(lines) == rep["cards"]
    for m in lines:
        card = load_card(out / m["card"])
        assert card.acceptance.runner == "inprocess" and card.type == "repo_refactor"
        assert card.acceptance.tests and card.base_layers
        assert m["project"] == "minicalc" and m["split"] == "train" and m["modifiers"]
        # the instruction never names the mutated file
        assert not any(f in card.instruction for f in m["files"])
        assert "core.py" not in card.instruction and "text.py" not in card.instruction
        # the workspace holds only the mutated files, the oracle restores them
        assert set(card.workspace) == set(m["files"])
    # resumable: a second run with the same limit decides nothing new
    again = synth_repo(str(FIXTURE), out, RepoOptions(limit=2, batch=3, combo_share=0.0))
    assert again["candidates"] == 0 and again["cards_total"] == rep["cards_total"]


def test_bad_sources_are_refused(tmp_path: Path) -> None:
    from ceiling._errors import ConfigError

    with pytest.raises(ConfigError, match="neither a folder nor NAME==VERSION"):
        synth_repo("no such thing", tmp_path / "o")
    empty = tmp_path / "proj"
    shutil.copytree(FIXTURE, empty)
    shutil.rmtree(empty / "tests")
    with pytest.raises(ConfigError, match="ships no test files"):
        synth_repo(str(empty), tmp_path / "o")


def test_policy_pass_rate_is_the_measured_difficulty(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """``--policy`` plays the policy on the new cards (real episodes, the cards' grader):
    the oracle's pass rate is 1 on every card, the null policy's 0; rows are kept per policy
    and k, and a second call measures nothing twice."""
    from ceiling.cli import main
    from ceiling.synth import measure_difficulty

    out = tmp_path / "cards"
    with pytest.raises(SystemExit) as e:
        main(["synth", "repo", str(FIXTURE), "--out", str(out), "--limit", "1",
              "--max-candidates", "6", "--combo-share", "0", "--exploits", "0",
              "--policy", "scripted:oracle", "-k", "2", "--json"])
    got = capsys.readouterr()
    assert not e.value.code, got.err
    rep = json.loads(got.out)
    dm = rep["difficulty_measured"]
    assert rep["cards"] >= 1 and dm["rated"] == rep["cards_total"] == dm["cards"]
    assert dm["policy"] == "scripted:oracle" and dm["k"] == 2
    assert dm["mean_pass_rate"] == 1.0 and dm["histogram"]["solved"] == dm["rated"]
    with pytest.raises(SystemExit) as e:
        main(["synth", "difficulty", str(out), "--policy", "scripted:null", "-k", "1", "--json"])
    null = json.loads(capsys.readouterr().out)
    assert not e.value.code
    assert null["mean_pass_rate"] == 0.0 and null["histogram"]["unsolved"] == null["rated"] >= 1
    rows = [json.loads(x) for x in (out / "difficulty.jsonl").read_text().splitlines()]
    assert {(r["policy"], r["k"]) for r in rows} == {("scripted:oracle", 2), ("scripted:null", 1)}
    assert all(r["graded"] == r["k"] and r["estimate"] is not None for r in rows)
    before = len(rows)
    again = measure_difficulty(out, "scripted:oracle", k=2)
    assert again["rated"] == dm["rated"]
    assert len((out / "difficulty.jsonl").read_text().splitlines()) == before


def test_difficulty_needs_a_synth_folder(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    from ceiling.cli import main

    with pytest.raises(SystemExit) as e:
        main(["synth", "difficulty", str(tmp_path), "--policy", "scripted:null"])
    assert e.value.code and "manifest.jsonl" in capsys.readouterr().err


def _helped_project(tmp_path: Path) -> Path:
    proj = tmp_path / "proj"
    shutil.copytree(FIXTURE, proj)
    (proj / "tests" / "__init__.py").write_text(
        "class ClampCases:\n    cases = [(5, 0, 10, 5), (-3, 0, 10, 0), (30, 0, 10, 10)]\n")
    (proj / "tests" / "test_helped.py").write_text(
        "import unittest\n\nfrom minicalc import clamp\n\nfrom . import ClampCases\n\n\n"
        "class ClampTest(ClampCases, unittest.TestCase):\n"
        "    def test_cases(self):\n"
        "        for x, lo, hi, want in self.cases:\n"
        "            with self.subTest(x=x):\n"
        "                self.assertEqual(clamp(x, lo, hi), want)\n")
    return proj


def test_an_edited_test_helper_is_tampering(tmp_path: Path) -> None:
    """The helpers beside the tests are protected like the tests: emptying the shared
    cases in the workspace's ``tests/__init__.py`` is -1, not a pass."""
    from ceiling.check import run_plan
    from ceiling.tools import Action
    from ceiling.verify import Outcome, ScriptPlan

    out = tmp_path / "cards"
    rep = synth_repo(str(_helped_project(tmp_path)), out,
                     RepoOptions(limit=1, max_candidates=6, combo_share=0.0, exploits=0))
    assert rep["cards"] == 1
    [m] = [json.loads(x) for x in (out / "manifest.jsonl").read_text().splitlines()]
    card = load_card(out / m["card"])
    assert "tests/__init__.py" in card.acceptance.protected
    plan = ScriptPlan("empty_cases", [Action("write", {"path": "tests/__init__.py",
                                                       "content": "class ClampCases:\n"
                                                                  "    cases = []\n"})])
    v, _ = run_plan(card, plan)
    assert v.outcome is Outcome.HACK_DETECTED and v.reward == -1.0, (v.outcome, v.evidence)
    # a same-named module planted on the workspace's import path never replaces the
    # grader's helper copy (it earned 0.89 on a cachetools card before)
    names = sorted({t.split("::")[-1] for t in card.acceptance.tests})
    shadow = "class ClampCases:\n    cases = []\n" + "".join(
        f"    def {n}(self):\n        pass\n" for n in names)
    v, _ = run_plan(card, ScriptPlan("shadow_helper", [Action(
        "write", {"path": "_csynth_tests.py", "content": shadow})]))
    assert v.reward <= 0 and v.outcome is not Outcome.SOLVED, (v.outcome, v.evidence)


def test_tests_that_import_helpers_beside_them_run_from_the_hidden_copy(tmp_path: Path) -> None:
    """A suite whose tests import ``tests/__init__.py`` (relative import) and use unittest
    subTest (cachetools' and more-itertools' layouts): its tests run under the grader, from
    the helper the hidden tests carry, not from the workspace's copy."""
    from ceiling.synth._baseline import run_baseline
    from ceiling.synth._source import load_source

    project = load_source(str(_helped_project(tmp_path)), cache=tmp_path / "cache")
    b = run_baseline(project)
    assert "test_helped.py::ClampTest::test_cases" in b.stable, (b.stable, b.failing)
    assert not b.flaky and len(b.stable) == 11


def test_a_test_file_that_does_not_import_is_left_out_not_the_suite(tmp_path: Path) -> None:
    """One test file needing a package the runtime lacks (funcy's tests import
    ``whatever``) stops pytest's whole session: the baseline reruns without it and says why."""
    from ceiling.synth._baseline import run_baseline
    from ceiling.synth._source import load_source

    proj = tmp_path / "proj"
    shutil.copytree(FIXTURE, proj)
    (proj / "tests" / "test_needs_dep.py").write_text(
        "import no_such_test_dependency\n\n\ndef test_x():\n    assert True\n")
    b = run_baseline(load_source(str(proj), cache=tmp_path / "cache"))
    assert len(b.stable) == 10 and not b.flaky
    assert list(b.uncollectable) == ["tests/test_needs_dep.py"]
    assert "no_such_test_dependency" in b.uncollectable["tests/test_needs_dep.py"]
