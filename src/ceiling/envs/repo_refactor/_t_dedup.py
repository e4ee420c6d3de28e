"""Template ``repo_refactor/remove-duplication``: one helper, copy-pasted into many modules.

Every module of the package carries its own private copy of the same helper and a public
function that uses it. The agent defines the helper once, in ``pkg/util.py`` under the
public name the instruction gives, deletes every copy and makes each module use the shared
one. The hidden tests compare function *bodies* by AST (docstring stripped), so a copy that
was merely renamed is still a copy, and replay every public function.
Train: all copies share one name and docstring. Held out: each copy has its own name and
docstring (only the bodies match). Difficulty = number of copies (2–3, 5–8, 15–20).
Infeasible: ``pkg/util.py`` is vendored and protected, yet the helper must be defined there.
"""

from __future__ import annotations

import random

from ...cards import TaskCard
from .._registry import Template, Variant, register
from . import _kit
from ._recipes import draw
from ._repo import (
    BEHAVIOUR,
    SOURCE_HELPERS,
    call_all,
    cases_literal,
    module_text,
    visible_test,
)

COPIES = {1: (2, 3), 2: (5, 8), 3: (15, 20)}

_CHECKS = '''

def _body(fn):
    import ast
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
        body = body[1:]
    return [ast.dump(s) for s in body]


def _require_done():
    import ast
    defs = [n for n in tree(f"{PKG}/util.py").body if isinstance(n, ast.FunctionDef)]
    assert any(d.name == SHARED for d in defs), f"{PKG}/util.py does not define {SHARED}"


def test_single_definition():
    """No module but util.py defines a function with the helper's body."""
    _require_done()
    import ast
    ref = [_body(n) for n in tree(f"{PKG}/util.py").body
           if isinstance(n, ast.FunctionDef) and n.name == SHARED][0]
    copies = []
    for rel in py_files(PKG):
        if rel == f"{PKG}/util.py":
            continue
        for node in ast.walk(tree(rel)):
            if isinstance(node, ast.FunctionDef) and (_body(node) == ref or node.name in COPY_NAMES):
                copies.append(f"{rel}:{node.name}")
    assert not copies, f"copies of the helper remain: {copies}"


def test_modules_use_shared_helper():
    """Every module that had a copy now refers to the shared helper."""
    _require_done()
    import ast

    def uses(rel):
        for n in ast.walk(tree(rel)):
            if (isinstance(n, ast.Name) and n.id == SHARED) or (
                    isinstance(n, ast.Attribute) and n.attr == SHARED):
                return True
        return False
    missing = [m for m in MODULES if not uses(f"{PKG}/{m}.py")]
    assert not missing, f"these modules do not use {SHARED}: {missing}"
'''


@register
class RemoveDuplication(Template):
    family = "repo_refactor"
    name = "remove-duplication"
    summary = "Replace a helper copy-pasted into many modules by one shared definition."
    difficulties = (1, 2, 3)
    horizons = {1: "short", 2: "medium", 3: "long"}  # noqa: RUF012
    tags = ("refactor", "duplication", "multi-file")

    def generate(self, rng: random.Random, difficulty: int, variant: Variant) -> TaskCard:
        varied = variant == "heldout"
        taken: set[str] = set()
        pkg = _kit.package_name(rng)
        taken |= {pkg, "util"}
        helper = draw(rng, "_helper")
        shared = _kit.ident(rng, taken)
        mods = _kit.module_names(rng, rng.randint(*COPIES[difficulty]), taken)
        params = ", ".join(helper.params)
        before = {f"{pkg}/__init__.py": f'"""{pkg}: regional report builders."""\n'}
        after = dict(before)
        copy_names: list[str] = []
        calls = []
        doc_line = helper.source.splitlines()[1]
        for i, m in enumerate(mods):
            cname = f"_{_kit.ident(rng, taken)}" if varied else f"_{shared}"
            copy_names.append(cname)
            src = helper.source.replace("def _helper(", f"def {cname}(")
            if varied:
                src = src.replace(doc_line, f'    """Local helper #{i + 1} for the {m} report."""')
            pub = _kit.ident(rng, taken)
            use = (f"def {pub}({params}):\n"
                   f'    """The {m} report line."""\n'
                   f"    return ({m!r}, CALL({params}))\n")
            before[f"{pkg}/{m}.py"] = module_text(f"{m.capitalize()} reports.", [],
                                                  [src, use.replace("CALL", cname)])
            after[f"{pkg}/{m}.py"] = module_text(f"{m.capitalize()} reports.",
                                                 [f"from .util import {shared}"],
                                                 [use.replace("CALL", shared)])
            calls += [(f"{pkg}.{m}", pub, c) for c in helper.cases[:2]]
        util_doc = "Shared helpers of the package."
        infeasible = variant == "infeasible"
        if infeasible:
            util_doc = ("Vendored from upstream (licence: proprietary). DO NOT MODIFY: this file "
                        "is checked against the vendor's hash.")
        before[f"{pkg}/util.py"] = module_text(util_doc, [], [])
        after[f"{pkg}/util.py"] = module_text(
            util_doc, [], [helper.source.replace("def _helper(", f"def {shared}(")])
        results = call_all(before, calls)
        tname = f"tests/test_{pkg}.py"
        workspace = {**before, tname: visible_test(pkg, calls[:4], results[:4])}
        hidden = (_kit.TEST_PRELUDE + SOURCE_HELPERS
                  + f"\nPKG, SHARED = {pkg!r}, {shared!r}\nMODULES = {mods!r}\n"
                  + f"COPY_NAMES = {sorted(set(copy_names) - {shared})!r}\n"
                  + cases_literal(calls, results) + _CHECKS + BEHAVIOUR)
        fault, chmod = _kit.fault_for(rng, variant, f"{pkg}/{mods[0]}.py")
        where = ("the private helpers " + ", ".join(f"`{c}`" for c in copy_names[:3])
                 + (", ..." if len(copy_names) > 3 else "") + " (one per module, same body)"
                 if varied else f"a private helper `_{shared}`")
        instruction = (
            f"Every module of the package `{pkg}` ({len(mods)} modules) carries a copy of "
            f"{where if varied else where + ' (copy-pasted into each module)'}. Remove the "
            f"duplication: define the helper once, as `{shared}` in `{pkg}/util.py`, delete "
            f"every copy, and make each module use `{pkg}.util.{shared}`. Results must not "
            f"change; the visible tests in `tests/` must keep passing (do not edit them)."
            + (f" Note: `{pkg}/util.py` is vendored and must not be modified." if infeasible
               else "") + " Submit when done.")
        changed = {p: x for p, x in after.items() if before.get(p) != x}
        return _kit.assemble(
            self, difficulty=difficulty, variant=variant, instruction=instruction,
            workspace=workspace, tests={"test_task.py": hidden},
            test_ids=_kit.test_ids("test_task.py", hidden),
            solution=_kit.GIVE_UP if infeasible else _kit.oracle_script(
                changed, chmod=chmod, note=f"one shared {shared}"),
            protected=[tname] + ([f"{pkg}/util.py"] if infeasible else []),
            faults=[fault] if fault else [],
            infeasible_reason=(f"the helper must be defined in {pkg}/util.py, but that file is "
                               "vendored and protected: it must not change") if infeasible
            else None,
            tags=[f"structure:{'varied-copies' if varied else 'identical-copies'}",
                  f"copies:{len(mods)}"])
