"""The scripted oracle plays like a policy: one command per call, through the harness."""

from __future__ import annotations

import json

import pytest

from ceiling.envs import make
from ceiling.harness import Harness, HarnessConfig
from ceiling.policies import load_policy
from ceiling.tools import Action
from ceiling.verify._oracle import CHUNK, oracle_actions, oracle_call_count

# difficulty-3 cards whose whole solution, sent as one call, is past the 8,000-char cap
BIG = [("repo_refactor/split-module-v1", 2), ("multi_tool/restock-v1", 0)]


@pytest.mark.parametrize("tid, seed", BIG)
@pytest.mark.parametrize("fmt", ["json", "bash", "line"])
def test_every_call_fits_and_parses(tid: str, seed: int, fmt: str) -> None:
    card = make(tid, seed=seed, difficulty=3, variant="train")
    cap = HarnessConfig().max_reply_chars
    assert len(json.dumps({"tool": "run", "args": {"cmd": card.solution}})) > cap
    d = Harness(HarnessConfig(format=fmt)).start(card)  # type: ignore[arg-type]
    acts = oracle_actions(card)
    assert len(acts) + 1 == oracle_call_count(card) and len(acts) > 5
    for a in [*acts, Action("submit")]:
        reply = d.format_reply(a)
        assert len(reply) < cap
        back = d.parse(reply)  # raises ReplyError if the harness refused it
        if fmt != "bash" or a.tool in ("run", "submit"):
            assert back == a


def test_line_scripts_split_by_line_and_file_scripts_by_file() -> None:
    card = make("terminal_ops/log-rotate-v1", seed=1, difficulty=2, variant="train")
    lines = [ln for ln in card.solution.split("\n")
             if ln.strip() and not ln.startswith("#") and ln.strip() != "set -e"]
    assert [a.args["cmd"] for a in oracle_actions(card)] == lines
    # the card's horizon label came from the same count (finish_card)
    assert card.horizon == ("short" if oracle_call_count(card) < 10 else
                            "medium" if oracle_call_count(card) <= 30 else "long")
    rr = make("repo_refactor/rename-symbol-v1", seed=0, difficulty=3, variant="fault")
    tools = [a.tool for a in oracle_actions(rr)]
    assert tools.count("write") >= 10 and set(tools) <= {"run", "write"}
    infeasible = make("repo_refactor/rename-symbol-v1", seed=0, difficulty=1,
                      variant="infeasible")
    assert [a.tool for a in oracle_actions(infeasible)] == ["give_up"]


def test_long_content_is_written_in_chunks() -> None:
    from ceiling.verify._oracle import _file_block

    text = "x = '" + "a" * (2 * CHUNK + 10) + "'\n"
    acts = _file_block(f"FILES = {{'m.py': {text!r}}}\nDELETE = ['old.py']")
    assert acts is not None
    assert [a.tool for a in acts] == ["write", "run", "run", "run"]
    assert acts[0].args["content"] == text[:CHUNK] and "rm -f" in acts[-1].args["cmd"]


@pytest.mark.parametrize("tid, seed, fmt", [("repo_refactor/split-module-v1", 2, "bash"),
                                            ("multi_tool/restock-v1", 0, "json")])
def test_oracle_solves_difficulty_3_through_the_harness(tid: str, seed: int, fmt: str) -> None:
    """Real episodes (namespace sandbox, real verifier): pass, one command per call."""
    from ceiling.rollout import run_episodes

    card = make(tid, seed=seed, difficulty=3, variant="train")
    [t] = run_episodes([card], load_policy("scripted:oracle"),
                       HarnessConfig(format=fmt), progress=False)  # type: ignore[arg-type]
    assert t.outcome == "solved", (t.outcome, t.error, [u.observation for u in t.turns][-3:])
    assert all(u.parse_error is None for u in t.turns)
    assert len(t.turns) == oracle_call_count(card)


def test_horizon_report_flags_labels_that_disagree_with_the_oracle() -> None:
    from ceiling.verify._oracle import horizon_report

    ok = make("terminal_ops/log-rotate-v1", seed=1, difficulty=3, variant="train")
    rr = make("repo_refactor/add-validation-v1", seed=0, difficulty=3, variant="train")
    gone = make("repo_refactor/add-validation-v1", seed=0, difficulty=3, variant="infeasible")
    rep = horizon_report([(c, oracle_call_count(c)) for c in (ok, rr, gone)])
    assert rep["checked"] == 2  # the infeasible card is skipped
    assert rep["mislabelled_templates"] == ["repo_refactor/add-validation-v1@d3"]
    row = rep["templates"]["repo_refactor/add-validation-v1@d3"]
    assert row["label"] == {"long": 1} and row["want"] == {"short": 1}
