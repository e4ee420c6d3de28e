"""Template ``repo_refactor/fix-bug``: find and fix injected bugs in a library package.

Bugs are mutations of correct recipe functions (see ``_recipes``). Train mutation kinds:
``off_by_one``, ``wrong_operator``, ``wrong_comparison``; held out: ``swapped_args`` and
``wrong_constant`` (never injected into a train card). The visible tests (protected) fail
on each buggy function; the hidden tests replay every function of the package on more
cases, with one test per bug, so a fix that only special-cases the visible inputs fails.
Difficulty: (modules, bugs) = (2–3, 1), (5–7, 2–3), (14–18, 7–9; > 30 steps).
Infeasible: two visible tests demand different results for the same call, and the tests are
protected, so no code can satisfy both.
"""

from __future__ import annotations

import random

from ...cards import TaskCard
from .._registry import Template, Variant, register
from . import _kit
from ._library import build_library, render_library
from ._recipes import FnSpec, distinguishes, draw
from ._repo import BEHAVIOUR, call_all, cases_literal, visible_test

TRAIN_KINDS = ("off_by_one", "wrong_operator", "wrong_comparison")
HELDOUT_KINDS = ("swapped_args", "wrong_constant")
SIZES = {1: ((2, 3), (1, 1)), 2: ((5, 7), (2, 3)), 3: ((14, 18), (7, 9))}


@register
class FixBug(Template):
    family = "repo_refactor"
    name = "fix-bug"
    summary = "Find and fix injected bugs (off-by-one, wrong operator, ...) across modules."
    difficulties = (1, 2, 3)
    horizons = {1: "short", 2: "medium", 3: "long"}  # noqa: RUF012
    tags = ("debug", "bugfix", "multi-file")

    def generate(self, rng: random.Random, difficulty: int, variant: Variant) -> TaskCard:
        kinds = HELDOUT_KINDS if variant == "heldout" else TRAIN_KINDS
        (mlo, mhi), (blo, bhi) = SIZES[difficulty]
        repo = build_library(rng, rng.randint(mlo, mhi))
        candidates = [(m, f) for m, f in repo.functions()
                      if any(k in f.mutants and distinguishes(f, k) for k in kinds)]
        nbugs = min(rng.randint(blo, bhi), len(candidates))
        while nbugs < blo:  # rare: top up the library with a function that can host a bug
            m, fns = repo.modules[0]
            fns.append(draw(rng, _kit.ident(rng, {f.name for _, f in repo.functions()}),
                            need=(kinds[0],)))
            candidates.append((m, fns[-1]))
            nbugs += 1
        bugs: list[tuple[str, FnSpec, str]] = []
        for m, f in rng.sample(candidates, nbugs):
            ok = [k for k in kinds if k in f.mutants and distinguishes(f, k)]
            bugs.append((m, f, rng.choice(ok)))
        overrides = {f.name: f.mutants[k] for _, f, k in bugs}
        correct = render_library(repo)
        buggy = render_library(repo, overrides)
        calls = repo.calls()
        results = call_all(correct, calls)
        # visible tests: the first case of every buggy function that exposes the bug,
        # plus one case of a few healthy functions
        observed = call_all(buggy, calls)
        vis_calls, vis_res = [], []
        buggy_names = {f.name for _, f, _ in bugs}
        for name in sorted(buggy_names):
            for call, got, want in zip(calls, observed, results):
                if call[1] == name and repr(got) != repr(want):
                    vis_calls.append(call)
                    vis_res.append(want)
                    break
        healthy = [i for i, c in enumerate(calls) if c[1] not in buggy_names]
        for i in healthy[:: max(1, len(healthy) // 3)][:3]:
            vis_calls.append(calls[i])
            vis_res.append(results[i])
        tname = f"tests/test_{repo.pkg}.py"
        visible = visible_test(repo.pkg, vis_calls, vis_res)
        infeasible = variant == "infeasible"
        hidden_extra = ""
        if infeasible:
            (mod, fn, args), want = vis_calls[0], vis_res[0]
            other = f"{want!r} + 1" if isinstance(want, (int, float)) else f"{want!r} * 2"
            visible += (f"\n\ndef test_{fn}_contract():\n"
                        f'    """Release note 4.2: this call must now return a different value."""\n'
                        f"    assert {mod}.{fn}(*{args!r}) == {other}\n")
            hidden_extra = (f"\n\ndef test_contract(subject):\n"
                            f"    got = outcome(subject, {mod + ':' + fn!r}, *{args!r})\n"
                            f"    assert same(got, {want!r}) and same(got, {other})\n")
        per_bug = "".join(
            f"\n\ndef test_fixed_{f.name}(subject):\n"
            f"    for args, want in {[(c, r) for (mm, ff, c), r in zip(calls, results) if ff == f.name]!r}:\n"
            f"        got = outcome(subject, {repo.pkg + '.' + m + ':' + f.name!r}, *args)\n"
            f"        assert same(got, want), f'{f.name}{{args!r}} returned {{got!r}}, expected {{want!r}}'\n"
            for m, f, _ in bugs)
        hidden = (_kit.TEST_PRELUDE + "\n\ndef _require_done(subject):\n    pass\n\n"
                  + cases_literal(calls, results) + per_bug + BEHAVIOUR + hidden_extra)
        workspace = dict(buggy)
        workspace[tname] = visible
        fault, chmod = _kit.fault_for(rng, variant, repo.path(bugs[0][0]))
        changed = {p: x for p, x in correct.items() if buggy.get(p) != x}
        n = len(bugs)
        instruction = (
            f"Some tests in `{tname}` fail: the package `{repo.pkg}` has "
            f"{'a bug' if n == 1 else f'{n} bugs'} ({'one function returns' if n == 1 else 'functions return'} "
            f"wrong results). Find and fix {'it' if n == 1 else 'all of them'} in the package's "
            f"code so that every function does what its docstring says. Do not edit the "
            f"tests. Run them with `python3 -m pytest -q tests`. Submit when done.")
        return _kit.assemble(
            self, difficulty=difficulty, variant=variant, instruction=instruction,
            workspace=workspace, tests={"test_task.py": hidden},
            test_ids=_kit.test_ids("test_task.py", hidden),
            solution=_kit.GIVE_UP if infeasible else _kit.oracle_script(
                changed, chmod=chmod, note="fix " + ", ".join(f"{f.name} ({k})" for _, f, k in bugs)),
            protected=[tname], faults=[fault] if fault else [],
            infeasible_reason=("two protected tests demand different results for the same call "
                               f"({vis_calls[0][1]}{vis_calls[0][2]!r}); no code can pass both")
            if infeasible else None,
            tags=[f"structure:{'+'.join(sorted({k for _, _, k in bugs}))}",
                  f"bugs:{n}", f"modules:{len(repo.modules)}"])
