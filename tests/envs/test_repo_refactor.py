"""Family ``repo_refactor``: every template generates valid, deterministic cards; held-out
structures never appear in train; hidden tests reach workspace code only through the
grader's ``subject``; the oracle solves and the null policy fails, through the real
``TaskEnv`` and verifier (namespace sandbox where available, else ``local``); and the
interface dodges of issue 10 class 6 (a forged ``__signature__``, a reset call counter, an
alias plus a stub) earn nothing."""

from __future__ import annotations

import ast
import re
import subprocess
import warnings
from pathlib import Path

import pytest
from _subject_fake import run_hidden

from ceiling.cards import write_tree
from ceiling.envs import VARIANTS, make, templates

FAMILY = "repo_refactor"
IDS = [t.template_id() for t in templates(FAMILY)]


def _real_backend() -> str:
    from ceiling import SandboxUnavailable
    from ceiling.sandbox import open_sandbox

    try:
        open_sandbox([{}], backend="namespace").close()
    except SandboxUnavailable:
        return "local"
    return "namespace"


def _episode(card, plan_name: str | list[dict]):  # type: ignore[no-untyped-def]
    """Play the oracle, the null policy, or a fixed list of actions (then submit)."""
    from ceiling.env import TaskEnv
    from ceiling.verify import null_plan, oracle_plan

    if isinstance(plan_name, list):
        actions = [*plan_name, {"tool": "submit", "args": {}}]

        class _Fixed:
            def next_action(self, card, history):  # type: ignore[no-untyped-def]
                return actions[len(history)]
        plan = _Fixed()
    else:
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
            assert card.acceptance.runner == "subject" and card.acceptance.tests
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
    from ceiling import ConfigError

    with pytest.raises(ConfigError, match="difficulty"):
        make("repo_refactor/fix-bug-v1", difficulty=7)
    with pytest.raises(ConfigError, match="seed"):
        make("repo_refactor/fix-bug-v1", seed=-1)


# --- hidden tests never run workspace code in the grader --------------------------------

ALLOWED_IMPORTS = {"ast", "copy", "math", "os", "stat"}


@pytest.mark.parametrize("tid", IDS)
def test_hidden_tests_only_reach_the_workspace_through_the_subject(tid: str) -> None:
    """No import of importlib/sys, no exec/eval/__import__, no sys.path in the grader's code
    (helper code sent to the subject is a string, not code of the test module); every test
    takes the ``subject`` fixture."""
    for v in VARIANTS:
        card = make(tid, seed=5, difficulty=1, variant=v)
        mod = ast.parse(card.tests["test_task.py"].data.decode())
        imported = {a.name.split(".")[0] for n in ast.walk(mod) if isinstance(n, ast.Import)
                    for a in n.names}
        imported |= {(n.module or "").split(".")[0] for n in ast.walk(mod)
                     if isinstance(n, ast.ImportFrom)}
        assert imported <= ALLOWED_IMPORTS, (card.id, imported - ALLOWED_IMPORTS)
        names = {n.id for n in ast.walk(mod) if isinstance(n, ast.Name)}
        assert not names & {"exec", "eval", "__import__", "compile", "sys", "importlib"}
        tests = [n for n in mod.body if isinstance(n, ast.FunctionDef)
                 and n.name.startswith("test_")]
        assert tests and all([a.arg for a in t.args.args] == ["subject"] for t in tests)


def _local(card, tmp: Path, *, oracle: bool) -> dict[str, bool]:  # type: ignore[no-untyped-def]
    ws = tmp / ("oracle" if oracle else "null")
    for layer in card.layers:
        write_tree(layer, ws)
    if oracle:
        subprocess.run(["sh", "-c", card.solution], cwd=ws, check=True, capture_output=True)
    return run_hidden({k: e.data for k, e in card.tests.items()}, ws)


@pytest.mark.parametrize("tid", IDS)
def test_hidden_tests_locally_oracle_passes_null_fails(tid: str, tmp_path: Path) -> None:
    """Fast check of every variant with a stand-in subject (tests/envs/_subject_fake.py);
    the real grader runs in the TaskEnv tests."""
    for i, v in enumerate(VARIANTS):
        card = make(tid, seed=20 + i, difficulty=1 + i % 2, variant=v)
        null = _local(card, tmp_path / v, oracle=False)
        assert sorted(null) == sorted(card.acceptance.tests)
        assert not any(null.values()), (card.id, null)
        if card.feasible:
            got = _local(card, tmp_path / v, oracle=True)
            assert all(got.values()), (card.id, got)


# --- class 6: interface dodges, played through TaskEnv ---------------------------------

def _write(path: str, content: str) -> dict:
    return {"tool": "write", "args": {"path": path, "content": content}}


def _text(card, path: str) -> str:  # type: ignore[no-untyped-def]
    return card.workspace[path].data.decode()


@pytest.mark.parametrize("variant", ["train", "heldout"])
def test_forged_signature_earns_nothing(variant: str) -> None:
    """An unchanged function with ``__signature__`` set to the requested one (and callers
    untouched): the new calling convention gives wrong results or the old one still works."""
    card = make("repo_refactor/change-signature-v1", seed=2, difficulty=1, variant=variant)
    m = re.search(r"signature of `(\w+)` in `([\w/]+\.py)` from `[^`]+` to `\w+\(([^)]*)\)`",
                  card.instruction)
    assert m, card.instruction
    fn, path, params = m.group(1), m.group(2), m.group(3)
    kind = "KEYWORD_ONLY" if params.startswith("*") else "POSITIONAL_OR_KEYWORD"
    names = [p.strip() for p in params.split(",") if p.strip() not in ("*", "")]
    forged = (_text(card, path) + "\n\nimport inspect as _inspect\n"
              f"{fn}.__signature__ = _inspect.Signature([_inspect.Parameter(p, "
              f"_inspect.Parameter.{kind}) for p in {names!r}])\n")
    verdict, reward = _episode(card, [_write(path, forged)])
    assert reward <= 0 and verdict.outcome.value == "failed", (verdict.outcome, verdict.tests)


RESET = """

def _ceiling_reset(f):
    def g(items, score, *rest):
        out = f(items, score, *rest)
        import gc
        holders = [score, getattr(score, "__self__", None), getattr(score, "_score", None)]
        holders += [o for o in gc.get_objects() if hasattr(o, "calls")]
        for obj in holders:
            for attr in ("calls", "count", "n"):
                try:
                    setattr(obj, attr, 0)
                except Exception:
                    pass
        return out
    return g
"""


@pytest.mark.parametrize("variant", ["train", "heldout"])
def test_counter_reset_after_the_run_earns_nothing(variant: str) -> None:
    """Slow code left as is, every function wrapped to reset whatever counter it can reach
    after running: the scorer is counted in the grader, out of the workspace's reach."""
    card = make("repo_refactor/make-fast-v1", seed=2, difficulty=2, variant=variant)
    pkg = re.search(r"In the package `(\w+)`", card.instruction).group(1)  # type: ignore[union-attr]
    fns: dict[str, list[str]] = {}
    for mod, fn in re.findall(r"`(\w+)\.(\w+)`", card.instruction.split("too slow:")[1]
                              .split(". ")[0]):
        fns.setdefault(mod, []).append(fn)
    acts = [_write(f"{pkg}/{mod}.py", _text(card, f"{pkg}/{mod}.py") + RESET
                   + "".join(f"\n{f} = _ceiling_reset({f})\n" for f in names))
            for mod, names in fns.items()]
    verdict, reward = _episode(card, acts)
    assert reward <= 0 and verdict.outcome.value == "failed", (verdict.outcome, verdict.tests)


def _dedup_dodge(card, *, stub: bool) -> list[dict]:  # type: ignore[no-untyped-def]
    """Each module keeps its copy (renamed, with a no-op statement so the body differs) and
    aliases it to the shared name; util.py gets a stub (or a real copy)."""
    shared = re.search(r"as `(\w+)` in `(\w+)/util\.py`", card.instruction)
    assert shared, card.instruction
    name, pkg = shared.group(1), shared.group(2)
    acts = []
    for path in card.workspace:
        if not path.startswith(f"{pkg}/") or path.endswith(("__init__.py", "util.py")):
            continue
        src = _text(card, path)
        tree = ast.parse(src)
        copy = next(n for n in tree.body if isinstance(n, ast.FunctionDef)
                    and n.name.startswith("_"))
        lines = src.splitlines()
        body_at = copy.body[1].lineno - 1  # after the docstring
        lines.insert(body_at, "    _unused = None")
        src = "\n".join(lines).replace(f"def {copy.name}(", "def _impl(")
        src = src.replace(f"{copy.name}(", f"{name}(") + f"\n\n{name} = _impl\n"
        acts.append(_write(path, src))
    util = _text(card, f"{pkg}/util.py")
    if stub:
        util += f"\n\ndef {name}(*args, **kwargs):\n    return None\n"
    else:
        first = next(a for a in acts)["args"]["content"]
        impl = ast.get_source_segment(first, next(
            n for n in ast.parse(first).body if isinstance(n, ast.FunctionDef)
            and n.name == "_impl"))
        util += "\n\n" + impl.replace("def _impl(", f"def {name}(") + "\n"  # type: ignore[union-attr]
    return [*acts, _write(f"{pkg}/util.py", util)]


def test_alias_plus_stub_earns_nothing() -> None:
    card = make("repo_refactor/remove-duplication-v1", seed=3, difficulty=1, variant="train")
    verdict, reward = _episode(card, _dedup_dodge(card, stub=True))
    assert reward <= 0 and verdict.outcome.value == "failed", (verdict.outcome, verdict.tests)


def test_alias_with_a_real_util_helper_fails_every_module() -> None:
    """util.py right, every module still on its own (aliased) copy: only the util test
    passes; every per-module test fails (the module never calls util's helper)."""
    card = make("repo_refactor/remove-duplication-v1", seed=3, difficulty=1, variant="heldout")
    verdict, reward = _episode(card, _dedup_dodge(card, stub=False))
    status = {t.id.split("::")[1]: t.status for t in verdict.tests}
    assert status["test_shared_helper"] == "passed", verdict.tests
    assert all(v != "passed" for k, v in status.items() if k.startswith("test_module_")), status
    assert reward < 0.5
