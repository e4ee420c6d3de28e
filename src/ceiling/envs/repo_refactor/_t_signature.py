"""Template ``repo_refactor/change-signature``: change a core function's signature and
update every caller.

Train: reorder the positional parameters (a permutation given in the instruction).
Held out: make every parameter keyword-only (``def f(*, a, b)``), so each call site must
name its arguments. The hidden tests check the new signature with ``inspect`` and replay
every caller on the generated cases, so a caller that was not updated (arguments now in the
wrong order, or positional) fails. Difficulty = number of caller modules (2–3, 6–9, 16–22).
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

def _require_done():
    import importlib
    import inspect
    core = importlib.import_module(f"{PKG}.{CORE}")
    sig = inspect.signature(getattr(core, FN))
    got = [(p.name, p.kind.name) for p in sig.parameters.values()]
    assert got == WANT, f"signature of {CORE}.{FN} is {got}, expected {WANT}"


def test_signature():
    """The core function has exactly the requested parameters, kinds and order."""
    _require_done()
'''


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
            # a caller left unchanged must be caught: with old-order positional arguments
            # the new function must misbehave on at least one case
            if kwonly or any(repr(_run(new_src, t.name, c)) != repr(_run(t.source, t.name, c))
                             for c in t.cases[:3]):
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
        hidden = (_kit.TEST_PRELUDE
                  + f"\nPKG, CORE, FN = {repo.pkg!r}, {repo.core!r}, {t.name!r}\n"
                  + f"WANT = {want!r}\n" + cases_literal(calls, results) + _CHECKS + BEHAVIOUR)
        fault, chmod = _kit.fault_for(rng, variant, f"{repo.pkg}/{repo.core}.py")
        changed = {p: x for p, x in after.items() if before.get(p) != x}
        shown = [p for p, _ in want]
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
