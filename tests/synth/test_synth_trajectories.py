"""``ceiling synth trajectories`` end to end: generic JSONL -> validated cards, depth and
breadth, and the CLI's JSON report (namespace sandboxes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ceiling.cards import load_card
from ceiling.cli import main
from ceiling.sandbox import namespaces_available

pytestmark = pytest.mark.skipif(namespaces_available() is not None,
                                reason="needs the namespace sandbox")

TRAJS = [
    {"id": "rotate", "instruction": "Rotate logs/app.log to logs/app.log.1 and start it empty.",
     "steps": [{"tool": "read", "args": {"path": "logs/app.log"}, "output": "one\ntwo"},
               {"tool": "run", "args": {"cmd": "mv logs/app.log logs/app.log.1"}},
               {"tool": "run", "args": {"cmd": ": > logs/app.log"}},
               {"tool": "submit", "args": {}}]},
    {"id": "perm", "steps": [{"tool": "run", "args": {"cmd": "chmod 755 bin/run.sh"}},
                             {"tool": "run", "args": {"cmd": "echo done >> notes.txt"}}]},
    {"id": "git", "steps": [{"tool": "run", "args": {"cmd": "git revert HEAD"}}]},
]


def test_trajectories_to_cards(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "t.jsonl"
    f.write_text("".join(json.dumps(t) + "\n" for t in TRAJS))
    out = tmp_path / "cards"
    with pytest.raises(SystemExit) as e:
        main(["synth", "trajectories", str(f), "--out", str(out), "--depth", "2",
              "--breadth", "1", "--json"])
    got = capsys.readouterr()
    assert not e.value.code, got.err
    rep = json.loads(got.out)
    assert rep["trajectories"] == 3 and rep["recovered"] == 2
    assert rep["refusals"].get("unsupported_command") == 1
    assert rep["per_modifier"]["single"]["cards"] == 2
    assert rep["per_modifier"]["depth"]["cards"] == 1
    assert rep["per_modifier"]["breadth"]["cards"] == 1
    man = [json.loads(x) for x in (out / "manifest.jsonl").read_text().splitlines()]
    rot = load_card(out / next(m["card"] for m in man if m["trajectories"] == ["rotate"]))
    assert rot.workspace["logs/app.log"].data == b"one\ntwo\n"
    assert rot.acceptance.runner == "files"
    depth = load_card(out / next(m["card"] for m in man if m["modifiers"] == ["depth"]))
    assert "Round 2" in depth.instruction
