"""Template ``repo_refactor/change-signature``: change a core function's signature and
update every caller.

Train: reorder the positional parameters (a permutation given in the instruction).
Held out: make every parameter keyword-only (``def f(*, a, b)``), so each call site must
name its arguments. The hidden tests check behaviour only, in the grader's subject: the core
function (and the public API's name for it) called with the NEW convention returns the
original results on hidden inputs, and the OLD convention fails as specified (reordered:
old-order positional arguments are read in the new order; keyword-only: a positional call
raises ``TypeError``), so an unchanged function with a forged ``__signature__`` fails. Every
caller is replayed too (an un-updated caller passes arguments in the wrong order, or
positionally). Difficulty = number of caller modules (2–3, 6–9, 16–22).
Infeasible: the requested new signature drops a parameter the function needs.
"""

from __future__ import annotations

import random

from ...cards import TaskCard
from .._registry import Template, Variant, register
from . import _kit
from ._callers import build, render
from ._recipes import _run
from ._repo import BEHAVIOUR, call_all, cases_literal, visible_test

_CHECKS = '''

def _require_done(subject):
    """The core function follows the new calling convention and rejects the old one."""
    for target in (f"{PKG}.{CORE}:{FN}", f"{PKG}.api:{FN}"):
        for args, kwargs, want in NEW_CALLS:
            got = outcome(subject, target, *args, **kwargs)
            assert same(got, want), (f"new convention: {FN}(*{args!r}, **{kwargs!r}) returned "
                                     f"{got!r}, expected {want!r}")
        for args, want in OLD_CALLS:
            got = outcome(subject, target, *args)
            assert same(got, want), (f"old convention: {FN}{args!r} returned {got!r}, expected "
                                     f"{want!r}")


def test_signature(subject):
    """Calls with the requested signature give the original results; the old way fails."""
    _require_done(subject)
'''


def _order(case: tuple, params: tuple[str, ...], new: tuple[str, ...]) -> tuple:
    """The arguments of ``case`` (given in the order of ``params``) in the order ``new``."""
    return tuple(case[params.index(p)] for p in new)


def _permute(rng: random.Random, params: tuple[str, ...]) -> tuple[str, ...]:
    while True:
        p = list(params)
        rng.shuffle(p)
        if tuple(p) != params:
            return tuple(p)


@register
class ChangeSignature(Template):
    family = "repo_refactor"
    name = "change-signature"
    summary = "Change a core function's signature and update every caller across modules."
    difficulties = (1, 2, 3)
    horizons = {1: "short", 2: "medium", 3: "long"}  # noqa: RUF012
    tags = ("refactor", "signature", "multi-file")

    def generate(self, rng: random.Random, difficulty: int, variant: Variant) -> TaskCard:
        kwonly = variant == "heldout"
        for _ in range(100):
            repo = build(rng, difficulty, "flat", min_params=2)
            t = repo.target
            if len(t.params) < 2:
                continue
            new = t.params if kwonly else _permute(rng, t.params)
            header = f"def {t.name}({', '.join(t.params)}):"
            new_header = (f"def {t.name}(*, {', '.join(new)}):" if kwonly
                          else f"def {t.name}({', '.join(new)}):")
            new_src = t.source.replace(header, new_header)
            # a caller left unchanged must be caught (with old-order positional arguments the
            # new function misbehaves on a replayed case), and so must an unchanged function
            # (called in the new order it misbehaves on a hidden case)
            if kwonly or (any(repr(_run(new_src, t.name, c)) != repr(_run(t.source, t.name, c))
                              for c in t.cases[:3])
                          and any(repr(_run(t.source, t.name, _order(c, t.params, new)))
                                  != repr(_run(t.source, t.name, c)) for c in t.cases)):
                break
        kinds = "KEYWORD_ONLY" if kwonly else "POSITIONAL_OR_KEYWORD"
        want = [(p, kinds) for p in new]
        before = render(repo, core_defs=t.source, ref=t.name, args_for=lambda ps: ", ".join(ps))
        after = render(repo, core_defs=new_src, ref=t.name,
                       args_for=(lambda ps: ", ".join(f"{p}={p}" for p in ps)) if kwonly
                       else (lambda ps: ", ".join(new)))
        calls = repo.caller_calls()
        results = call_all(before, calls)
        tname = f"tests/test_{repo.pkg}.py"
        workspace = dict(before)
        workspace[tname] = visible_test(repo.pkg, calls[:3], results[:3])
        infeasible = variant == "infeasible"
        if infeasible:
            dropped = rng.choice(t.params)
            want = [(p, kinds) for p in new if p != dropped]
        shown = [p for p, _ in want]
        new_calls, old_calls = [], []
        for c in t.cases:
            orig = _run(t.source, t.name, c)
            named = dict(zip(t.params, c, strict=True))
            if kwonly:
                new_calls.append(((), {p: named[p] for p in shown}, orig))
                old_calls.append((tuple(c), "<TypeError>"))
            else:
                new_calls.append((tuple(named[p] for p in shown), {}, orig))
                old_calls.append((tuple(c), _run(new_src, t.name, c)))
        hidden = (_kit.TEST_PRELUDE
                  + f"\nPKG, CORE, FN = {repo.pkg!r}, {repo.core!r}, {t.name!r}\n"
                  + f"NEW_CALLS = {new_calls!r}\nOLD_CALLS = {old_calls!r}\n"
                  + cases_literal(calls, results) + _CHECKS + BEHAVIOUR)
        fault, chmod = _kit.fault_for(rng, variant, f"{repo.pkg}/{repo.core}.py")
        changed = {p: x for p, x in after.items() if before.get(p) != x}
        sig = (f"{t.name}(*, {', '.join(shown)})" if kwonly
               else f"{t.name}({', '.join(shown)})")
        extra = (" Every parameter becomes keyword-only, so every call must name its "
                 "arguments." if kwonly else " Only the order of the parameters changes.")
        if infeasible:
            extra = (f" The parameter `{dropped}` is removed; the function's results must not "
                     f"change for any caller.")
        instruction = (
            f"In the package `{repo.pkg}`, change the signature of `{t.name}` in "
            f"`{repo.pkg}/{repo.core}.py` from `{t.name}({', '.join(t.params)})` to `{sig}`."
            f"{extra} Update every caller in `{repo.pkg}` so that all results stay exactly the "
            f"same. Do not edit `{repo.pkg}/api.py` or the visible tests in `tests/`. "
            f"Submit when done.")
        return _kit.assemble(
            self, difficulty=difficulty, variant=variant, instruction=instruction,
            workspace=workspace, tests={"test_task.py": hidden},
            test_ids=_kit.test_ids("test_task.py", hidden),
            solution=_kit.GIVE_UP if infeasible else _kit.oracle_script(
                changed, chmod=chmod, note=f"new signature {sig}"),
            protected=[tname, f"{repo.pkg}/api.py"], faults=[fault] if fault else [],
            infeasible_reason=(f"`{dropped}` is an input of {t.name}'s computation: without it "
                               f"the results cannot stay the same") if infeasible else None,
            tags=[f"structure:{'keyword-only' if kwonly else 'reorder'}",
                  f"callers:{len(repo.callers)}"])
