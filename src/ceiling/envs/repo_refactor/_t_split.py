"""Template ``repo_refactor/split-module``: split one large module into several.

``pkg/<big>.py`` holds every function; the agent moves each group into its own module
``pkg/<group>.py`` and leaves ``<big>.py`` as a thin compatibility layer that re-exports
them (``pkg/api.py`` imports from it and is protected). The hidden tests check where each
function is *defined* (the AST of the files, read as data; ``__module__`` in the subject),
that the old module defines nothing itself and re-exports the very same objects (asked in
the grader's subject), and replay every function there.
Train: the groups are listed in the instruction. Held out: the groups are only marked by
``# == section: NAME ==`` comments in the file. Difficulty = groups × functions
(2 × 2–3; 3–4 × 3; 6–7 × 4–5, > 30 steps). Infeasible: one function to move does not exist.
"""

from __future__ import annotations

import random

from ...cards import TaskCard
from .._registry import Template, Variant, register
from . import _kit
from ._recipes import FnSpec, _run, draw
from ._repo import (
    BEHAVIOUR,
    SUBJECT_HELPERS,
    call_all,
    cases_literal,
    module_text,
    visible_test,
)

SIZES = {1: ((2, 2), (2, 3)), 2: ((3, 4), (3, 3)), 3: ((6, 7), (4, 5))}

_CHECKS = '''

def _require_done(subject):
    for group in GROUPS:
        source(f"{PKG}/{group}.py")  # exists, and is a regular file


def test_functions_moved(subject):
    """Each function is defined in its group's module and nowhere else."""
    _require_done(subject)
    subject.define(HELPERS)
    for group, names in GROUPS.items():
        defined = {n.name for n in tree(f"{PKG}/{group}.py").body if isinstance(n, ast.FunctionDef)}
        for name in names:
            assert name in defined, f"{name} is not defined in {PKG}/{group}.py"
            got = subject.call("__ceiling__:module_of", f"{PKG}.{group}", name)
            assert got == f"{PKG}.{group}", f"{group}.{name} comes from {got!r}"


def test_old_module_reexports(subject):
    """The old module defines no function itself and re-exports the same objects."""
    _require_done(subject)
    defs = [n.name for n in ast.walk(tree(f"{PKG}/{BIG}.py")) if isinstance(n, ast.FunctionDef)]
    assert not defs, f"{PKG}/{BIG}.py still defines {defs}"
    subject.define(HELPERS)
    pairs = [((f"{PKG}.{BIG}", n), (f"{PKG}.{g}", n)) for g, names in GROUPS.items() for n in names]
    got = subject.call("__ceiling__:same_objects", pairs)
    bad = [p[0][1] for p, ok in zip(pairs, got) if ok is not True]
    assert not bad, f"{BIG} does not re-export the new modules' objects: {bad}"
'''


@register
class SplitModule(Template):
    family = "repo_refactor"
    name = "split-module"
    summary = "Split a large module into per-topic modules, keeping a re-exporting shim."
    difficulties = (1, 2, 3)
    horizons = {1: "short", 2: "medium", 3: "long"}  # noqa: RUF012
    tags = ("refactor", "split", "multi-file")

    def generate(self, rng: random.Random, difficulty: int, variant: Variant) -> TaskCard:
        sections = variant == "heldout"
        (glo, ghi), (flo, fhi) = SIZES[difficulty]
        taken: set[str] = set()
        pkg = _kit.package_name(rng)
        big = rng.choice(("utils", "helpers", "misc", "legacy", "everything"))
        taken |= {pkg, big, "api"}
        groups: dict[str, list[FnSpec]] = {}
        for g in _kit.module_names(rng, rng.randint(glo, ghi), taken):
            groups[g] = [draw(rng, _kit.ident(rng, taken)) for _ in range(rng.randint(flo, fhi))]
        order = [(g, f) for g, fs in groups.items() for f in fs]
        rng.shuffle(order)
        if sections:
            order.sort(key=lambda x: list(groups).index(x[0]))
            chunks, last = [], None
            for g, f in order:
                src = f.source
                if g != last:
                    src = f"# == section: {g} ==\n\n\n" + src
                    last = g
                chunks.append(src)
        else:
            chunks = [f.source for _, f in order]
        names = sorted(f.name for _, f in order)
        init = f'"""{pkg}: tools for the back office. Public API: {pkg}.api."""\n'
        api = module_text(f"Public API of {pkg}. Keep it stable.",
                          [f"from .{big} import (  # noqa: F401", *[f"    {n}," for n in names], ")"],
                          [])
        before = {f"{pkg}/__init__.py": init, f"{pkg}/api.py": api,
                  f"{pkg}/{big}.py": module_text(f"Everything of {pkg} in one module.", [], chunks)}
        after = {f"{pkg}/{g}.py": module_text(f"{g.capitalize()} functions of {pkg}.", [],
                                              [f.source for f in fs])
                 for g, fs in groups.items()}
        after[f"{pkg}/{big}.py"] = module_text(
            "Compatibility layer: the functions now live in per-topic modules.",
            [f"from .{g} import {', '.join(f.name for f in fs)}  # noqa: F401"
             for g, fs in groups.items()], [])
        calls = ([(f"{pkg}.api", f.name, c) for _, f in order for c in f.cases[:2]]
                 + [(f"{pkg}.{g}", f.name, f.cases[2]) for g, f in order])
        results = call_all(before, calls[: len(calls) - len(order)])
        # the per-group calls: functions move verbatim, so the original code answers them
        results += [_run(f.source, f.name, f.cases[2]) for _, f in order]
        tname = f"tests/test_{pkg}.py"
        workspace = {**before, tname: visible_test(pkg, calls[:4], results[:4])}
        group_names = {g: [f.name for f in fs] for g, fs in groups.items()}
        ghost = None
        if variant == "infeasible":
            ghost = _kit.ident(rng, taken)
            g0 = next(iter(group_names))
            group_names = {**group_names, g0: [*group_names[g0], ghost]}
        hidden = (_kit.TEST_PRELUDE + f"\nHELPERS = {SUBJECT_HELPERS!r}\n"
                  + f"\nPKG, BIG = {pkg!r}, {big!r}\nGROUPS = {group_names!r}\n"
                  + cases_literal(calls, results) + _CHECKS + BEHAVIOUR)
        fault, chmod = _kit.fault_for(rng, variant, f"{pkg}/{big}.py")
        if sections:
            plan = (f"Each `# == section: NAME ==` comment in `{pkg}/{big}.py` starts a group: "
                    f"move the functions of section NAME into `{pkg}/NAME.py`.")
        else:
            plan = "Move " + "; ".join(
                f"{', '.join(f'`{n}`' for n in ns)} into `{pkg}/{g}.py`"
                for g, ns in group_names.items()) + "."
        instruction = (
            f"The module `{pkg}/{big}.py` has grown too large. Split it: {plan} Each "
            f"function must be defined in its new module only; `{pkg}/{big}.py` must keep "
            f"working as a thin compatibility layer that just re-exports them (import them "
            f"from the new modules, define nothing). `{pkg}/api.py` is the public API and must "
            f"not change. Submit when done.")
        return _kit.assemble(
            self, difficulty=difficulty, variant=variant, instruction=instruction,
            workspace=workspace, tests={"test_task.py": hidden},
            test_ids=_kit.test_ids("test_task.py", hidden),
            solution=_kit.GIVE_UP if ghost else _kit.oracle_script(after, chmod=chmod,
                                                                   note=f"split {big}"),
            protected=[f"{pkg}/api.py", tname], faults=[fault] if fault else [],
            infeasible_reason=(f"there is no function `{ghost}` in {pkg}/{big}.py to move")
            if ghost else None,
            tags=[f"structure:{'sections' if sections else 'listed'}",
                  f"functions:{len(order)}"])

