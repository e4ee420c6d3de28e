"""multi_tool templates: valid cards, no leaked answers, determinism, held-out variants that
change the work, and real episodes through TaskEnv and the verifier (namespace sandbox when
this machine has it, else the local backend): the oracle solves, the null policy and a
reused-ticket cheat fail, infeasible cards reward giving up, and the card tools, the
background service and the per-line oracle convention work step by step."""

from __future__ import annotations

import ast
import re

import pytest

from ceiling.cards import TaskCard
from ceiling.check import run_plan
from ceiling.envs import VARIANTS, make, templates
from ceiling.envs._common import oracle_steps
from ceiling.tools import Action
from ceiling.verify import Outcome, null_plan, oracle_plan

FAMILY = templates("multi_tool")
IDS = [t.template_id() for t in FAMILY]


def _backend() -> str:
    try:
        from ceiling.sandbox import namespaces_available
    except ImportError:
        return "local"
    return "namespace" if namespaces_available() is None else "local"


BACKEND = _backend()
pytestmark = pytest.mark.filterwarnings("ignore::ceiling.sandbox.LocalSandboxWarning")


def _expected(card: TaskCard) -> list[str]:
    tree = ast.parse(card.tests["test_task.py"].data.decode())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "EXPECTED":
            return list(ast.literal_eval(node.value))
    raise AssertionError("no EXPECTED in the hidden tests")


def _answer_file(card: TaskCard) -> str:
    m = re.search(r"^ANSWER = '([^']+)'", card.tests["test_task.py"].data.decode(), re.MULTILINE)
    assert m
    return m.group(1)


def test_family_has_six_templates_reaching_every_horizon() -> None:
    assert len(FAMILY) >= 6
    for t in FAMILY:
        assert set(t.horizons) == set(t.difficulties)
        assert {t.horizons[d] for d in t.difficulties} == {"short", "medium", "long"}


@pytest.mark.parametrize("tid", IDS)
def test_cards_are_complete_for_every_difficulty_and_variant(tid: str) -> None:
    cls = next(t for t in FAMILY if t.template_id() == tid)
    for d in cls.difficulties:
        for v in VARIANTS:
            card = make(tid, seed=7, difficulty=d, variant=v)
            assert card.type == "multi_tool" and card.horizon == cls.horizons[d]
            src = card.tests["test_task.py"].data.decode()
            names = re.findall(r"^def (test_\w+)\(", src, re.MULTILINE)
            assert card.acceptance.tests == [f"test_task.py::{n}" for n in names]
            assert card.acceptance.runner == "files"
            assert {t.name for t in card.tools} == {"sql", "search"}
            assert "service.py" in card.acceptance.protected
            assert all(p in card.acceptance.protected for p in card.workspace
                       if p.startswith("docs/"))
            assert "127.0.0.1:" in card.instruction and "service.py" in card.instruction
            assert (len(card.faults) == 1) == (v == "fault")
            assert card.feasible == (v != "infeasible")
            if v == "infeasible":
                assert card.infeasible_reason and card.solution.startswith("# infeasible")
                assert not card.milestones
            else:
                steps = oracle_steps([ln for ln in card.solution.splitlines()[1:]])
                assert card.budget.max_steps >= 2 * steps
            assert card.split == ("heldout" if v == "heldout" else "train")


@pytest.mark.parametrize("tid", IDS)
def test_no_answer_is_in_the_workspace_and_seeds_change_answers(tid: str) -> None:
    a, b = make(tid, seed=1, difficulty=2), make(tid, seed=2, difficulty=2)
    assert make(tid, seed=1, difficulty=2).content_id() == a.content_id()
    ea, eb = _expected(a), _expected(b)
    assert ea and not set(ea) & set(eb)
    for v in ("train", "heldout", "fault"):
        card = make(tid, seed=3, difficulty=2, variant=v)
        blob = b"\n".join(e.data for e in card.workspace.values())
        for line in _expected(card):
            assert line.split()[-1].encode() not in blob, f"{v}: answer {line!r} leaked"


@pytest.mark.parametrize("tid", IDS)
def test_heldout_changes_the_work_not_just_the_numbers(tid: str) -> None:
    def shape(card: TaskCard) -> str:
        return re.sub(r"[0-9a-fA-F]{6,}|\d+", "#", card.solution)

    for seed in (0, 1):
        train = make(tid, seed=seed, difficulty=2, variant="train")
        held = make(tid, seed=seed, difficulty=2, variant="heldout")
        assert shape(train) != shape(held)
        assert train.instruction != held.instruction


# --- real episodes ---------------------------------------------------------------------

ROTATION = dict(zip(IDS, ["train", "heldout", "fault", "train", "fault", "heldout",
                          "fault", "train"], strict=False))


@pytest.mark.parametrize("tid", IDS)
def test_oracle_solves_and_null_fails(tid: str) -> None:
    card = make(tid, seed=11, difficulty=1, variant=ROTATION[tid])
    verdict, _ = run_plan(card, oracle_plan(), backend=BACKEND)
    assert verdict.outcome == Outcome.SOLVED, verdict.evidence
    assert verdict.reward >= 1.0
    verdict, _ = run_plan(card, null_plan(), backend=BACKEND)
    assert not verdict.passed and verdict.reward <= 0, verdict
    shown = verdict.model_dump_json()
    assert not any(line.split()[-1] in shown for line in _expected(card)), "answer in evidence"


def test_infeasible_rewards_giving_up_only() -> None:
    card = make("multi_tool/fx-settlement-v1", seed=4, difficulty=1, variant="infeasible")
    verdict, _ = run_plan(card, oracle_plan(), backend=BACKEND)
    assert verdict.outcome == Outcome.ABSTAINED_CORRECT
    verdict, _ = run_plan(card, null_plan(), backend=BACKEND)
    assert not verdict.passed and verdict.reward <= 0


def _episode(card: TaskCard):  # type: ignore[no-untyped-def]
    from ceiling.env import TaskEnv

    env = TaskEnv(card, backend=BACKEND)
    env.reset(seed=0)
    return env


def test_step_by_step_with_card_tools_and_a_background_service() -> None:
    card = make("multi_tool/refund-top-customer-v1", seed=5, difficulty=2, variant="train")
    env = _episode(card)
    try:
        obs, *_ , info = env.step(Action("sql", {"query": "SELECT COUNT(*) AS n FROM customers"}))
        assert info["error"] is None and obs.splitlines()[0] == "n"
        obs, *_, info = env.step(Action("search", {"query": "refund rate"}))
        assert "policies/" in obs and "%" in obs
        lines = card.solution.splitlines()[1:]  # drop "set -e": each line runs on its own
        assert lines[1].endswith("&")  # the service starts in one step ...
        for ln in lines:
            obs, _r, term, trunc, info = env.step(Action("run", {"cmd": ln}))
            assert not (term or trunc) and "[exit" not in obs, (ln, obs)
        port = card.instruction.split("127.0.0.1:")[1].split(")")[0]
        obs, *_ = env.step(Action("run", {"cmd": f"curl -s http://127.0.0.1:{port}/"}))
        assert "POST /refunds" in obs  # ... and still answers in a later one
        obs, *_ = env.step(Action("run", {"cmd": (
            f"curl -s -X POST -d '{{\"customer_id\": 1}}' http://127.0.0.1:{port}/refunds")}))
        assert "missing" in obs and "percent" in obs
        _obs, reward, term, _t, info = env.step(Action("submit"))
        assert term and info["verdict"].outcome == Outcome.SOLVED, info["verdict"].evidence
        assert info["verdict"].milestones == {"first_answer": True}
        assert reward >= 1.0
    finally:
        env.close()


def test_reused_tickets_from_another_seed_fail() -> None:
    card = make("multi_tool/incident-paging-v1", seed=8, difficulty=2)
    other = make("multi_tool/incident-paging-v1", seed=9, difficulty=2)
    env = _episode(card)
    try:
        env.step(Action("write", {"path": _answer_file(card),
                                  "content": "\n".join(_expected(other)) + "\n"}))
        *_, info = env.step(Action("submit"))
        v = info["verdict"]
        assert v.outcome == Outcome.FAILED and v.reward <= 0, v
    finally:
        env.close()
