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
