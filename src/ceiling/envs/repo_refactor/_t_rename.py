"""Template ``repo_refactor/rename-symbol``: rename a core function across every module.

The agent renames ``core.OLD`` to ``NEW``, updates every caller, and keeps the public API
(``pkg/api.py``, protected) working through a one-line alias ``OLD = NEW`` in the core
module. Difficulty = number of caller modules (2–3, 6–9, 16–22: the last needs > 30 steps).
Held out: the ``nested`` layout (callers in a subpackage, attribute calls ``core.OLD(...)``).
Infeasible: the named function does not exist anywhere in the package.
"""

from __future__ import annotations

import random

from ...cards import TaskCard
from .._registry import Template, Variant, register
from . import _kit
from ._callers import build, render
from ._repo import BEHAVIOUR, SUBJECT_HELPERS, call_all, cases_literal, visible_test

_CHECKS = '''

def _require_done(subject):
    defs = {n.name for n in tree(f"{PKG}/{CORE}.py").body
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    assert NEW in defs, f"{PKG}/{CORE}.py does not define {NEW}"


def test_renamed_with_alias(subject):
    """NEW is defined in the core module, OLD survives only as the alias `OLD = NEW`, and
    NEW, the alias and the public API's OLD all compute the function on hidden inputs."""
    _require_done(subject)
    binds = []
    for node in tree(f"{PKG}/{CORE}.py").body:
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == OLD for t in targets):
                binds.append(node)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                               ast.Import, ast.ImportFrom)):
            names = [a.asname or a.name for a in getattr(node, "names", [])]
            assert getattr(node, "name", None) != OLD and OLD not in names, f"{OLD} is redefined"
    assert len(binds) == 1 and isinstance(binds[0], ast.Assign) \\
        and isinstance(binds[0].value, ast.Name) and binds[0].value.id == NEW, \\
        f"{CORE}.{OLD} must be the one-line alias {OLD} = {NEW}"
    subject.define(HELPERS)
    same_ = subject.call("__ceiling__:same_objects", [((f"{PKG}.{CORE}", OLD), (f"{PKG}.{CORE}", NEW)),
                                                     ((f"{PKG}.api", OLD), (f"{PKG}.{CORE}", NEW))])
    assert same_ == [True, True], f"{OLD} is not the very object {NEW}"
    for target in (f"{PKG}.{CORE}:{NEW}", f"{PKG}.{CORE}:{OLD}", f"{PKG}.api:{OLD}"):
        for args, want in TARGET_CASES:
            got = outcome(subject, target, *args)
            assert same(got, want), f"{target}{args!r} returned {got!r}, expected {want!r}"


def test_no_old_references(subject):
    """No module but the alias line in the core module still uses the old name."""
    _require_done(subject)
    bad = []
    for rel in py_files(PKG):
        if rel.endswith("api.py"):
            continue
        uses = []
        for node in ast.walk(tree(rel)):
            if isinstance(node, ast.Name) and node.id == OLD:
                uses.append((node.lineno, type(node.ctx).__name__))
            elif isinstance(node, ast.Attribute) and node.attr == OLD:
                uses.append((node.lineno, "attr"))
            elif isinstance(node, ast.alias) and OLD in (node.name, node.asname):
                uses.append((getattr(node, "lineno", 0), "import"))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == OLD:
                uses.append((node.lineno, "def"))
        if rel.endswith(f"/{CORE}.py"):
            uses = [u for u in uses if u[1] != "Store"][:]
        if uses:
            bad.append((rel, uses))
    assert not bad, f"old name still used: {bad}"
'''


@register
class RenameSymbol(Template):
    family = "repo_refactor"
    name = "rename-symbol"
    summary = "Rename a core function across all modules; keep the public API via an alias."
    difficulties = (1, 2, 3)
    horizons = {1: "short", 2: "medium", 3: "long"}  # noqa: RUF012
    tags = ("refactor", "rename", "multi-file")

    def generate(self, rng: random.Random, difficulty: int, variant: Variant) -> TaskCard:
        layout = "nested" if variant == "heldout" else "flat"
        repo = build(rng, difficulty, layout)
        old = repo.target.name
        new = _kit.ident(rng, {old, *[o.name for o in repo.others],
                               *[f for _, fs in repo.callers for f in fs]})
        before = render(repo, core_defs=repo.target.source, ref=old,
                        args_for=lambda ps: ", ".join(ps))
        after = render(repo, core_defs=repo.target.source.replace(f"def {old}(", f"def {new}(")
                       + f"\n\n{old} = {new}  # deprecated alias, kept for the public API\n",
                       ref=new, args_for=lambda ps: ", ".join(ps))
        calls = repo.caller_calls() + [(f"{repo.pkg}.api", old, c) for c in repo.target.cases]
        results = call_all(before, calls)
        vis_calls = calls[:2] + calls[-2:]
        tname = f"tests/test_{repo.pkg}.py"
        workspace = dict(before)
        workspace[tname] = visible_test(repo.pkg, vis_calls, results[:2] + results[-2:])
        ghost = None
        if variant == "infeasible":
            ghost = _kit.ident(rng, set(repo.labels) | {old, new, *[o.name for o in repo.others]})
        asked = ghost or old
        target_cases = [(c, r) for (m, f, c), r in zip(calls, results) if m.endswith(".api")]
        hidden = (_kit.TEST_PRELUDE + f"\nHELPERS = {SUBJECT_HELPERS!r}\n"
                  + f"\nPKG, CORE, OLD, NEW = {repo.pkg!r}, {repo.core!r}, {asked!r}, {new!r}\n"
                  + f"TARGET_CASES = {target_cases!r}\n"
                  + cases_literal(calls, results) + _CHECKS + BEHAVIOUR)
        fault, chmod = _kit.fault_for(rng, variant, f"{repo.pkg}/{repo.core}.py")
        changed = {p: t for p, t in after.items() if before.get(p) != t}
        instruction = (
            f"The package `{repo.pkg}` (in this folder) has a function `{asked}` in "
            f"`{repo.pkg}/{repo.core}.py`. Rename it to `{new}` and update every module in "
            f"`{repo.pkg}` that uses it, so that no code refers to `{asked}` any more. "
            f"`{repo.pkg}/api.py` is the public API and must not change: keep `{asked}` "
            f"importable from `{repo.pkg}.{repo.core}` as a one-line alias (`{asked} = {new}`). "
            f"Behaviour must stay the same; the visible tests in `tests/` must keep passing "
            f"(do not edit them). Submit when done.")
        return _kit.assemble(
            self, difficulty=difficulty, variant=variant, instruction=instruction,
            workspace=workspace, tests={"test_task.py": hidden},
            test_ids=_kit.test_ids("test_task.py", hidden),
            solution=_kit.GIVE_UP if ghost else _kit.oracle_script(changed, chmod=chmod,
                                                                   note=f"rename {old}"),
            protected=[tname, f"{repo.pkg}/api.py"], faults=[fault] if fault else [],
            infeasible_reason=(f"there is no function `{ghost}` in {repo.pkg}/{repo.core}.py "
                               f"or anywhere else in the package") if ghost else None,
            tags=[f"structure:{layout}", f"callers:{len(repo.callers)}"])
