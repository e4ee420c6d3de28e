"""Template ``repo_refactor/extract-function``: pull inline computations out into functions.

Each host function computes a value inline and then formats a report line. The agent
extracts the computation into a new function with the name and parameters the
instruction gives, and makes the host call it. The hidden tests (in the grader; workspace
code runs only in the ``subject``) check the new function by behaviour — called
positionally and by its parameter names it returns the inline computation's results —,
that the host calls it (run in the subject with the new function swapped for a stand-in
that returns a secret token, the host's line must carry the token) and no longer contains
the inlined statements (AST of the file, read as data), and replay every host.
Train: hosts are module-level functions. Held out: hosts are methods of report classes
(``Report.line(self, ...)``); the new function is still module-level. Difficulty = number
of extractions (1; 3; 10–12 across modules, > 30 steps). Infeasible: the requested name
already belongs to another public function that the protected visible tests still use.
"""

from __future__ import annotations

import random

from ...cards import TaskCard
from .._registry import Template, Variant, register
from . import _kit
from ._recipes import FnSpec, _run, draw
from ._repo import SUBJECT_HELPERS, module_text

SIZES = {1: (1, 1, 1), 2: (3, 3, 2), 3: (10, 12, 5)}

_CHECKS = '''

def _require_done(subject):
    """Each new function exists and takes exactly its parameters, by name and in order."""
    for mod, host, new, params, _stmts, _expr in EXTRACTS:
        args, want = FIRST[new]
        got = outcome(subject, f"{PKG}.{mod}:{new}", **dict(zip(params, args)))
        assert same(got, want), f"{new}(**{dict(zip(params, args))!r}) returned {got!r}"


def test_new_functions(subject):
    """Each extracted function returns what the inline computation produced."""
    _require_done(subject)
    for mod, new, args, want in NEW_CASES:
        got = outcome(subject, f"{PKG}.{mod}:{new}", *args)
        assert same(got, want), f"{new}{args!r} returned {got!r}, expected {want!r}"


def test_hosts_delegate(subject):
    """Each host calls its new function and no longer inlines the computation."""
    _require_done(subject)
    subject.define(HELPERS)
    for mod, host, new, _params, stmts, expr in EXTRACTS:
        node = None
        scope = tree(f"{PKG}/{mod}.py")
        if "." in host:
            scope = next((c for c in scope.body if isinstance(c, ast.ClassDef)
                          and c.name == host.split(".")[0]), scope)
        for n in scope.body:
            if isinstance(n, ast.FunctionDef) and n.name == host.split(".")[-1]:
                node = n
        assert node is not None, f"{host} is missing from {PKG}/{mod}.py"
        dumps = {ast.dump(n) for n in ast.walk(node)}
        left = [s for s in stmts if s in dumps] + ([expr] if expr in dumps else [])
        assert not left, f"{host} still contains the inlined computation"
        args = [*FIRST[new][0], "total"]
        got = subject.call("__ceiling__:routed", f"{PKG}.{mod}", host, f"{PKG}.{mod}", new,
                           TOKEN, args)
        assert got == f"total: {TOKEN}", f"{host} does not call {new}"


def test_hosts_unchanged(subject):
    """Every host returns exactly the same report line as before."""
    _require_done(subject)
    subject.define(HELPERS)
    for mod, host, args, want in HOST_CASES:
        got = outcome(subject, "__ceiling__:call_path", f"{PKG}.{mod}", host, list(args))
        assert same(got, want), f"{host}{args!r} returned {got!r}, expected {want!r}"
'''


def _parts(spec: FnSpec) -> tuple[list[str], str]:
    """Body statements (no docstring, no final return) and the returned expression."""
    lines = spec.source.rstrip("\n").splitlines()
    body = lines[2:]  # def line and one-line docstring
    ret = body[-1].strip()
    assert ret.startswith("return "), spec.source
    return body[:-1], ret[len("return "):]


def _dumps(spec: FnSpec) -> tuple[list[str], str]:
    import ast

    fn = ast.parse(spec.source).body[0]
    assert isinstance(fn, ast.FunctionDef)
    stmts = [ast.dump(s) for s in fn.body[1:-1]]
    ret = fn.body[-1]
    assert isinstance(ret, ast.Return) and ret.value is not None
    return stmts, ast.dump(ret.value)


@register
class ExtractFunction(Template):
    family = "repo_refactor"
    name = "extract-function"
    summary = "Extract inline computations into named functions and call them."
    difficulties = (1, 2, 3)
    horizons = {1: "short", 2: "medium", 3: "long"}  # noqa: RUF012
    tags = ("refactor", "extract")

    def generate(self, rng: random.Random, difficulty: int, variant: Variant) -> TaskCard:
        methods = variant == "heldout"
        lo, hi, nmods = SIZES[difficulty]
        taken: set[str] = set()
        pkg = _kit.package_name(rng)
        taken.add(pkg)
        mods = _kit.module_names(rng, nmods, taken)
        n = rng.randint(lo, hi)
        jobs = []  # (module, host name, host path, new name, spec)
        for i in range(n):
            mod = mods[i % nmods]
            new = _kit.ident(rng, taken)
            spec = draw(rng, new)
            while spec.source.count("return ") != 1:  # early returns cannot be inlined
                spec = draw(rng, new)
            host = _kit.ident(rng, taken)
            path = f"{host.title().replace('_', '')}Report.line" if methods else host
            jobs.append((mod, host, path, new, spec))
        before = {f"{pkg}/__init__.py": f'"""{pkg}: report lines for the dashboard."""\n'}
        after = dict(before)
        extracts, new_cases, host_cases = [], [], []
        for mod in mods:
            mine = [j for j in jobs if j[0] == mod]
            old_chunks, new_chunks = [], []
            for _, host, path, new, spec in mine:
                stmts, expr = _parts(spec)
                params = ", ".join(spec.params)
                if methods:
                    cls = path.split(".")[0]
                    head = (f"class {cls}:\n"
                            f'    """Formats one dashboard line."""\n\n'
                            f"    def line(self, {params}, label):\n"
                            f'        """The report line: label, then the computed value."""\n')
                    ind = "    "
                else:
                    head = (f"def {host}({params}, label):\n"
                            f'    """The report line: label, then the computed value."""\n')
                    ind = ""
                inline = "".join(f"{ind}{s}\n" for s in stmts) + f"{ind}    result = {expr}\n"
                tail = f'{ind}    return f"{{label}}: {{result}}"\n'
                old_chunks.append(head + inline + tail)
                new_chunks += [spec.source.replace(f"def {new}(", f"def {new}("),
                               head + f"{ind}    result = {new}({params})\n" + tail]
                sd, ed = _dumps(spec)
                extracts.append((mod, path, new, list(spec.params), sd, ed))
                for c in spec.cases[:3]:
                    want = _run(spec.source, new, c)
                    new_cases.append((mod, new, c, want))
                    host_cases.append((mod, path, (*c, "total"), f"total: {want}"))
            before[f"{pkg}/{mod}.py"] = module_text(f"{mod.capitalize()} dashboard lines.", [],
                                                    old_chunks)
            after[f"{pkg}/{mod}.py"] = module_text(f"{mod.capitalize()} dashboard lines.", [],
                                                   new_chunks)
        tname = f"tests/test_{pkg}.py"
        vis = [f'"""Visible tests for {pkg}. Run: python3 -m pytest -q tests"""',
               "import pathlib", "import sys", "",
               "sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))", ""]
        vis += [f"import {pkg}.{m}  # noqa: E402" for m in mods]
        for k, (mod, path, args, want) in enumerate(host_cases[::3]):
            target = (f"{pkg}.{mod}.{path.split('.')[0]}().line" if methods
                      else f"{pkg}.{mod}.{path}")
            vis += ["", "", f"def test_line_{k}():", f"    assert {target}(*{args!r}) == {want!r}"]
        infeasible = variant == "infeasible"
        reason = None
        if infeasible:
            mod, _, _, new, spec = jobs[0]
            taken_fn = draw(rng, new)
            while taken_fn.params == spec.params:
                taken_fn = draw(rng, new)
            before[f"{pkg}/{mod}.py"] += "\n\n" + taken_fn.source
            want = _run(taken_fn.source, new, taken_fn.cases[0])
            vis += ["", "", f"def test_{new}_existing():",
                    f"    assert {pkg}.{mod}.{new}(*{taken_fn.cases[0]!r}) == {want!r}"]
            reason = (f"`{new}` already exists in {pkg}/{mod}.py with different parameters, and "
                      f"the protected visible tests still call it: the name cannot be reused")
        first = {new: (args, want) for _, new, args, want in reversed(new_cases)}
        token = f"token-{rng.getrandbits(64):016x}"
        hidden = (_kit.TEST_PRELUDE + f"\nHELPERS = {SUBJECT_HELPERS!r}\n"
                  + f"\nPKG, TOKEN = {pkg!r}, {token!r}\nFIRST = {first!r}\n"
                  + f"EXTRACTS = {extracts!r}\nNEW_CASES = {new_cases!r}\n"
                  + f"HOST_CASES = {host_cases!r}\n" + _CHECKS)
        workspace = {**before, tname: "\n".join(vis) + "\n"}
        fault, chmod = _kit.fault_for(rng, variant, f"{pkg}/{jobs[0][0]}.py")
        todo = "; ".join(f"in `{pkg}/{mod}.py`, from `{path}` into `{new}({', '.join(spec.params)})`"
                         for mod, _, path, new, spec in jobs)
        instruction = (
            f"Refactor the package `{pkg}`: each listed report function computes its value "
            f"inline (every statement before `return f\"{{label}}: {{result}}\"`). Extract that "
            f"computation into a new module-level function with exactly the given name and "
            f"parameters, returning the value, and make the report function call it — {todo}. "
            f"Results must not change; do not edit the visible tests in `tests/`. "
            f"Submit when done.")
        changed = {p: x for p, x in after.items() if before.get(p) != x}
        return _kit.assemble(
            self, difficulty=difficulty, variant=variant, instruction=instruction,
            workspace=workspace, tests={"test_task.py": hidden},
            test_ids=_kit.test_ids("test_task.py", hidden),
            solution=_kit.GIVE_UP if infeasible else _kit.oracle_script(
                changed, chmod=chmod, note=f"extract {len(jobs)} function(s)"),
            protected=[tname], faults=[fault] if fault else [], infeasible_reason=reason,
            tags=[f"structure:{'methods' if methods else 'functions'}", f"extracts:{n}"])
