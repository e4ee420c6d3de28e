"""Template ``repo_refactor/remove-duplication``: one helper, copy-pasted into many modules.

Every module of the package carries its own private copy of the same helper and a public
function that uses it. The agent defines the helper once, in ``pkg/util.py`` under the
public name the instruction gives, deletes every copy and makes each module use the shared
one. The hidden tests (grader side; the workspace is reached through the ``subject``):

- ``util.SHARED`` is a ``def`` that computes the helper on hidden inputs, and ``util.py``
  imports nothing from the package (a stub, or a ``SHARED`` that hands the work to a copy
  left in a module, fails; this gates every other test);
- per module: no function in it (``def`` or ``lambda``) has the helper's body, compared as an
  AST with the docstring dropped and local names renamed (so a reformatted, renamed or
  re-variabled copy is still a copy); its public function really calls ``util.SHARED`` (run
  in the subject with ``util.SHARED`` swapped for a stand-in returning a secret token, the
  result must carry the token; a private copy or alias does not); and it returns the
  original results on hidden inputs.

One test per module, so partial work earns partial credit and a module that keeps a copy
earns nothing.
Train: all copies share one name and docstring. Held out: each copy has its own name and
docstring (only the bodies match). Difficulty = number of copies (2–3, 5–8, 15–20).
Infeasible: ``pkg/util.py`` is vendored and protected, yet the helper must be defined there.
"""

from __future__ import annotations

import random

from ...cards import TaskCard
from .._registry import Template, Variant, register
from . import _kit
from ._recipes import _run, draw
from ._repo import SUBJECT_HELPERS, call_all, module_text, visible_test

COPIES = {1: (2, 3), 2: (5, 8), 3: (15, 20)}

_CHECKS = '''

def _norm(fn):
    """A function's body as an AST dump: docstring dropped, parameters and local names
    renamed by order of appearance (formatting, comments and local names do not count)."""
    import copy
    body = [ast.Return(fn.body)] if isinstance(fn, ast.Lambda) else list(fn.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \\
            and isinstance(body[0].value.value, str):
        body = body[1:]
    a = fn.args
    local = [x.arg for x in [*a.posonlyargs, *a.args, a.vararg, *a.kwonlyargs, a.kwarg] if x]
    for stmt in body:
        for n in ast.walk(stmt):
            name = n.id if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) else \\
                n.arg if isinstance(n, ast.arg) else None
            if name and name not in local:
                local.append(name)
    new = {name: f"_v{i}" for i, name in enumerate(local)}

    class Rename(ast.NodeTransformer):
        def visit_Name(self, node):
            return ast.Name(new.get(node.id, node.id), node.ctx)

        def visit_arg(self, node):
            node.arg = new.get(node.arg, node.arg)
            return node
    return ast.dump(ast.Module([Rename().visit(copy.deepcopy(x)) for x in body], []))


def _require_done(subject):
    """util.py defines SHARED itself (it imports nothing from the package's other modules,
    so it cannot hand the work to a copy left there), and SHARED computes the helper on
    hidden inputs."""
    util = tree(f"{PKG}/util.py")
    defs = [n for n in util.body if isinstance(n, ast.FunctionDef)]
    assert any(d.name == SHARED for d in defs), f"{PKG}/util.py does not define {SHARED}"
    for n in ast.walk(util):
        if isinstance(n, ast.ImportFrom):
            assert not (n.level or (n.module or "").split(".")[0] == PKG), \\
                f"{PKG}/util.py imports from the package ({ast.dump(n)})"
        elif isinstance(n, ast.Import):
            assert all(a.name.split(".")[0] != PKG for a in n.names), \\
                f"{PKG}/util.py imports the package"
    for args, want in HELPER_CASES:
        got = outcome(subject, f"{PKG}.util:{SHARED}", *args)
        assert same(got, want), f"util.{SHARED}{args!r} returned {got!r}, expected {want!r}"


def test_shared_helper(subject):
    """The helper is defined once, in util.py, and works."""
    _require_done(subject)


def check_module(subject, mod, pub, cases):
    _require_done(subject)
    ref = _norm(ast.parse(HELPER_SRC).body[0])
    rel = f"{PKG}/{mod}.py"
    for node in ast.walk(tree(rel)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            name = getattr(node, "name", "<lambda>")
            assert name not in COPY_NAMES and _norm(node) != ref, \\
                f"{rel}:{name} is still a copy of the helper"
    subject.define(HELPERS)
    for args, want in cases:
        got = subject.call("__ceiling__:routed", f"{PKG}.{mod}", pub, f"{PKG}.util", SHARED,
                           TOKEN, list(args))
        assert same(got, (mod, TOKEN)), f"{mod}.{pub} does not call {PKG}.util.{SHARED}"
        got = outcome(subject, f"{PKG}.{mod}:{pub}", *args)
        assert same(got, want), f"{mod}.{pub}{args!r} returned {got!r}, expected {want!r}"
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
        pubs: list[str] = []
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
            pubs.append(pub)
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
        hidden_calls = [(f"{pkg}.{m}", pub, c) for m, pub in zip(mods, pubs, strict=True)
                        for c in helper.cases]
        hidden_res = call_all(before, hidden_calls)
        token = f"token-{rng.getrandbits(64):016x}"
        hidden = (_kit.TEST_PRELUDE + f"\nHELPERS = {SUBJECT_HELPERS!r}\n"
                  + f"\nPKG, SHARED, TOKEN = {pkg!r}, {shared!r}, {token!r}\n"
                  + f"COPY_NAMES = {sorted(set(copy_names) - {shared})!r}\n"
                  + f"HELPER_SRC = {helper.source!r}\n"
                  + f"HELPER_CASES = {[(c, _run(helper.source, '_helper', c)) for c in helper.cases]!r}\n"
                  + _CHECKS)
        for i, (m, pub) in enumerate(zip(mods, pubs, strict=True)):
            cases = [(c, r) for (mm, _, c), r in zip(hidden_calls, hidden_res) if mm == f"{pkg}.{m}"]
            hidden += (f"\n\ndef test_module_{i}(subject):\n"
                       f'    """{m}: no copy left, calls the shared helper, same results."""\n'
                       f"    check_module(subject, {m!r}, {pub!r}, {cases!r})\n")
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
