"""Family ``repo_refactor``: every template generates valid, deterministic cards; held-out
structures never appear in train; the oracle solves and the null policy fails, through the
real ``TaskEnv`` and verifier (namespace sandbox where available, else ``local``)."""

from __future__ import annotations

import ast
import warnings

import pytest

from ceiling.envs import VARIANTS, make, templates

FAMILY = "repo_refactor"
IDS = [t.template_id() for t in templates(FAMILY)]


def _real_backend() -> str:
    from ceiling._errors import SandboxUnavailable
    from ceiling.sandbox import open_sandbox

    try:
        open_sandbox([{}], backend="namespace").close()
    except SandboxUnavailable:
        return "local"
    return "namespace"


def _episode(card, plan_name: str):  # type: ignore[no-untyped-def]
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
                act = plan.next_action(card, history)
                obs, reward, term, trunc, info = env.step(act)
                history.append((act, obs))
                if term or trunc:
                    return info["verdict"], reward
        finally:
            env.close()


def test_family_has_eight_templates_with_long_horizons() -> None:
    names = {t.name for t in templates(FAMILY)}
    assert names >= {"rename-symbol", "extract-function", "remove-duplication", "fix-bug",
                     "change-signature", "make-fast", "add-validation", "split-module"}
    assert all("long" in t.horizons.values() for t in templates(FAMILY))


@pytest.mark.parametrize("tid", IDS)
def test_every_variant_and_difficulty_makes_a_valid_card(tid: str) -> None:
    cls = templates(FAMILY)[IDS.index(tid)]
    for d in cls.difficulties:
        for v in VARIANTS:
            card = make(tid, seed=3, difficulty=d, variant=v)
            assert card.type == FAMILY and card.horizon == cls.horizons[d]
            assert card.acceptance.runner == "sandbox" and card.acceptance.tests
            assert card.split == ("heldout" if v == "heldout" else "train")
            assert bool(card.faults) == (v == "fault")
            assert card.feasible == (v != "infeasible")
            assert card.solution.strip()
            for rel, entry in {**card.workspace, **card.tests}.items():
                if rel.endswith(".py"):
                    ast.parse(entry.data.decode(), rel)  # every generated file is valid Python
            ids = {f"test_task.py::{n.name}" for n in ast.parse(card.tests["test_task.py"].data).body
                   if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")}
            assert set(card.acceptance.tests) == ids
            for pattern in card.acceptance.protected:
                assert pattern in card.workspace, f"{pattern} protects nothing"
            # generated names never shadow the standard library (the verifier flags that)
            tops = {p.split("/")[0] for p in card.workspace if p.endswith(".py") or "/" in p}
            import sys
            assert not tops & set(sys.stdlib_module_names)


@pytest.mark.parametrize("tid", IDS)
def test_make_is_deterministic_per_seed(tid: str) -> None:
    a = make(tid, seed=42, difficulty=2, variant="train")
    b = make(tid, seed=42, difficulty=2, variant="train")
    c = make(tid, seed=43, difficulty=2, variant="train")
    assert a.content_id() == b.content_id()
    assert a.content_id() != c.content_id()


@pytest.mark.parametrize("tid", IDS)
def test_heldout_structure_never_in_train(tid: str) -> None:
    def structures(variant: str) -> set[str]:
        out = set()
        for seed in range(6):
            card = make(tid, seed=seed, difficulty=1 + seed % 2, variant=variant)
            out |= {t for t in card.tags if t.startswith("structure:")}
        return out

    held = structures("heldout")
    assert held
    for v in ("train", "fault", "infeasible"):
        assert not held & structures(v), f"{v} cards reuse a held-out structure"


def test_long_difficulty_needs_many_edits() -> None:
    """Long cards touch many files: far more than 30 steps for an agent (read + edit each)."""
    card = make("repo_refactor/rename-symbol-v1", seed=5, difficulty=3)
    modules = [p for p in card.workspace if p.endswith(".py") and not p.startswith("tests/")]
    assert card.horizon == "long" and len(modules) >= 18
    assert card.budget.max_steps > 60


# Two variants per template, rotating so every variant is exercised by several templates
# (the full template x variant x difficulty sweep is `ceiling envs validate FAMILY --n N`).
ORACLE_CASES = [(tid, VARIANTS[(i + k) % len(VARIANTS)]) for i, tid in enumerate(IDS)
                for k in (0, 2)]


@pytest.mark.parametrize(("tid", "variant"), ORACLE_CASES)
def test_oracle_solves(tid: str, variant: str) -> None:
    card = make(tid, seed=1, difficulty=1, variant=variant)
    verdict, reward = _episode(card, "oracle")
    want = "solved" if card.feasible else "abstained_correct"
    assert verdict.outcome.value == want, (verdict.outcome, verdict.evidence, verdict.tests)
    assert reward == pytest.approx(1.0)


@pytest.mark.parametrize("tid", IDS)
def test_null_policy_fails_every_hidden_test(tid: str) -> None:
    variant = "heldout" if IDS.index(tid) % 2 else "train"
    card = make(tid, seed=1, difficulty=1, variant=variant)
    verdict, reward = _episode(card, "null")
    assert verdict.outcome.value == "failed" and reward <= 0
    assert verdict.tests and all(t.status != "passed" for t in verdict.tests
                                 if t.id in card.acceptance.tests)


def test_oracle_solves_a_long_card() -> None:
    card = make("repo_refactor/fix-bug-v1", seed=2, difficulty=3, variant="heldout")
    verdict, _ = _episode(card, "oracle")
    assert verdict.outcome.value == "solved", verdict.evidence


def test_bad_input_is_a_clear_error() -> None:
    from ceiling._errors import ConfigError

    with pytest.raises(ConfigError, match="difficulty"):
        make("repo_refactor/fix-bug-v1", difficulty=7)
    with pytest.raises(ConfigError, match="seed"):
        make("repo_refactor/fix-bug-v1", seed=-1)
