"""Family ``security_audit``: six vulnerability kinds in two modes; valid deterministic cards,
held-out structures never in train, oracle solves / null fails through the real ``TaskEnv``,
and the reproduce grader cannot be fooled by a hard-coded or side-channel flag."""

from __future__ import annotations

import ast
import warnings

import pytest

from ceiling.envs import VARIANTS, make, templates
from ceiling.tools import Action

FAMILY = "security_audit"
IDS = [t.template_id() for t in templates(FAMILY)]
KINDS = ("sql-injection", "path-traversal", "command-injection", "hardcoded-secret",
         "unsafe-deserialization", "weak-hashing")


def _real_backend() -> str:
    from ceiling._errors import SandboxUnavailable
    from ceiling.sandbox import open_sandbox

    try:
        open_sandbox([{}], backend="namespace").close()
    except SandboxUnavailable:
        return "local"
    return "namespace"


def _episode(card, actions: list[Action] | None = None, plan_name: str = "oracle"):  # type: ignore[no-untyped-def]
    """Run a plan (or a fixed list of actions then submit) through TaskEnv."""
    from ceiling.env import TaskEnv
    from ceiling.verify._plans import null_plan, oracle_plan

    plan = oracle_plan() if plan_name == "oracle" else null_plan()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the local backend warns on every start
        env = TaskEnv(card, backend=_real_backend())
        try:
            env.reset(seed=0)
            history: list = []
            while True:
                if actions is not None:
                    act = actions[len(history)] if len(history) < len(actions) else Action("submit")
                else:
                    act = plan.next_action(card, history)
                obs, reward, term, trunc, info = env.step(act)
                history.append((act, obs))
                if term or trunc:
                    return info["verdict"], reward
        finally:
            env.close()


def test_six_kinds_in_two_modes() -> None:
    names = {t.name for t in templates(FAMILY)}
    assert names == {f"{k}-{m}" for k in KINDS for m in ("fix", "reproduce")}


@pytest.mark.parametrize("tid", IDS)
def test_every_variant_and_difficulty_makes_a_valid_card(tid: str) -> None:
    cls = templates(FAMILY)[IDS.index(tid)]
    for d in cls.difficulties:
        for v in VARIANTS:
            card = make(tid, seed=4, difficulty=d, variant=v)
            assert card.type == FAMILY and card.horizon == cls.horizons[d]
            assert card.acceptance.tests and card.solution.strip()
            assert bool(card.faults) == (v == "fault") and card.feasible == (v != "infeasible")
            for rel, entry in {**card.workspace, **card.tests}.items():
                if rel.endswith(".py"):
                    ast.parse(entry.data.decode(), rel)
            assert "service/app.py" in card.workspace and "service/server.py" in card.workspace
            if tid.endswith("-reproduce-v1"):
                assert "exploit.py" not in card.workspace
                # the real flag never ships: only the dummy is in the workspace
                assert card.workspace["service/flag.txt"].data.startswith(b"FLAG{this-is-a-local")
            else:
                assert card.acceptance.protected == ["tests/test_service.py"]


@pytest.mark.parametrize("tid", IDS)
def test_make_is_deterministic_per_seed(tid: str) -> None:
    assert (make(tid, seed=9, difficulty=2).content_id()
            == make(tid, seed=9, difficulty=2).content_id())
    assert make(tid, seed=9).content_id() != make(tid, seed=10).content_id()


@pytest.mark.parametrize("tid", IDS)
def test_heldout_structure_never_in_train(tid: str) -> None:
    def structures(variant: str) -> set[str]:
        return {t for s in range(2) for t in make(tid, seed=s, variant=variant).tags
                if t.startswith("structure:")}

    held = structures("heldout")
    assert held and not held & (structures("train") | structures("fault")
                                | structures("infeasible"))
    # and the held-out service really differs (another injection context / filter / store)
    a = make(tid, seed=1, variant="train").workspace
    b = make(tid, seed=1, variant="heldout").workspace
    assert a["service/app.py"].data != b["service/app.py"].data


# One feasible variant per template, rotating so every variant is exercised by several
# templates, plus a few infeasible twins
# (the full template x variant x difficulty sweep is `ceiling envs validate FAMILY --n N`).
ORACLE_CASES = ([(tid, ("train", "heldout", "fault")[i % 3]) for i, tid in enumerate(IDS)]
                + [(tid, "infeasible") for tid in IDS[::4]])


@pytest.mark.parametrize(("tid", "variant"), ORACLE_CASES)
def test_oracle_solves(tid: str, variant: str) -> None:
    card = make(tid, seed=1, difficulty=1 + (variant == "heldout"), variant=variant)
    verdict, reward = _episode(card)
    want = "solved" if card.feasible else "abstained_correct"
    assert verdict.outcome.value == want, (verdict.outcome, verdict.evidence, verdict.tests)
    assert reward == pytest.approx(1.0)


@pytest.mark.parametrize("tid", IDS)
def test_null_policy_fails(tid: str) -> None:
    card = make(tid, seed=1, difficulty=1, variant="train")
    verdict, reward = _episode(card, plan_name="null")
    assert verdict.outcome.value == "failed" and reward <= 0


def _write(path: str, content: str) -> Action:
    return Action("write", {"path": path, "content": content})


def test_reproduce_rejects_the_dummy_flag_and_side_channels() -> None:
    """Printing the workspace's dummy flag, or a flag read from disk without going through
    the service, earns nothing: the grader uses a fresh instance and watches for a leak."""
    card = make("security_audit/path-traversal-reproduce-v1", seed=2)
    dummy = _write("exploit.py", "print(open('service/flag.txt').read())\n")
    verdict, reward = _episode(card, [dummy])
    assert verdict.outcome.value == "failed" and reward <= 0
    snoop = _write("exploit.py", (
        "import glob\n"
        "for p in glob.glob('/tmp/**/private/*', recursive=True):\n"
        "    print(open(p).read())\n"))
    verdict, reward = _episode(card, [snoop])
    assert verdict.outcome.value == "failed" and reward <= 0


def test_fix_that_deletes_the_route_fails() -> None:
    """Removing the vulnerable feature is not a fix: the functional checks catch it."""
    card = make("security_audit/sql-injection-fix-v1", seed=3)
    app = card.workspace["service/app.py"].data.decode()
    broken = app.replace('"/lookup": lookup, ', "").replace('"/lookup": lookup', "")
    assert broken != app
    verdict, reward = _episode(card, [_write("service/app.py", broken)])
    assert verdict.outcome.value == "failed" and reward <= 0
