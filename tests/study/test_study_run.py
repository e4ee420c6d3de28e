"""A whole (tiny) study on the real tiny base, real sandboxed episodes and the real
verifier: cut after three units, resumed to the end without redoing them, reported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ceiling._errors import ConfigError
from ceiling.study import PRESETS, Study, load_study, study_from_dict


def test_a_tiny_study_resumes_where_it_stopped_and_reports(tmp_path: Path) -> None:
    cfg = load_study("tiny-test")
    out = tmp_path / "study"
    said: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        Study(cfg, out, say=said.append, max_units=3).run()
    first = {p.name: p.read_text() for p in (out / "evals").glob("*.json")}
    assert set(first) == {"base.json", "grpo-s0-r2.json"}
    partial = json.loads((out / "study.json").read_text())
    assert not partial["complete"] and "grpo-s1-r4" in partial["missing"]
    assert "Partial study" in (out / "report.html").read_text()

    result = Study(cfg, out, say=said.append).run()
    assert result["complete"] and result["missing"] == []
    for name, text in first.items():  # finished units were not redone
        assert (out / "evals" / name).read_text() == text
    assert sum("training grpo seed 0" in s for s in said) == 1
    for opt in ("grpo", "es"):
        rows = result["curves"][opt]
        assert [r["rollouts"] for r in rows] == [2, 4]
        for r in rows:
            assert r["seeds"] == [0, 1] and r["tokens"] > 0 and r["trainer_flops"] > 0
            assert 0.0 <= r["pass@1"]["value"] <= r["pass@k"]["value"] <= 1.0
            assert len(r["pass@1"]["per_seed"]) == 2 and r["pass@1"]["ci"] is not None
            assert r["diversity"]["value"] >= 0
        assert result["fits"][opt]["pass@1"] is not None  # base + 2 rungs: 3 budgets
        assert set(result["change_at_top"][opt]) >= {"pass@1", "pass@k", "diversity"}
    grpo4 = result["curves"]["grpo"][1]
    es4 = result["curves"]["es"][1]
    assert grpo4["trainer_flops"] > es4["trainer_flops"]  # ES has no backward pass
    assert result["grpo_loses_pass_k"]["answer"] in (
        "yes", "no: both lose pass@k", "no: GRPO does not lose pass@k here")
    html = (out / "report.html").read_text()
    assert "Does GRPO lose pass@2" in html and "<svg" in html and "Partial" not in html
    assert (out / "pass1.svg").is_file() and (out / "passk.svg").is_file()
    # base weights untouched: every run's checkpoints record the same base hash
    shas = {json.loads(p.read_text())["base_sha256"]
            for p in (out / "runs").glob("*/checkpoints/step-*/meta.json")}
    assert len(shas) == 1

    other = study_from_dict({**PRESETS["tiny-test"], "seeds": [5, 6]})
    with pytest.raises(ConfigError, match="another config"):
        Study(other, out).run()
