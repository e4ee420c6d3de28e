"""Template ``repo_refactor/add-validation``: reject bad input with clear errors.

The instruction lists, per function, the rules its parameters must satisfy (non-empty
lists, positive integers, percentages in [0, 100], non-negative amounts, non-zero
divisors, ordered bounds). The agent adds checks that raise ``ValueError`` naming the
parameter; valid inputs must behave exactly as before. The hidden tests call every function
in the grader's subject with each kind of invalid value (a trusted probe reports whether the
raised exception is a ``ValueError``, its class name and its message, as plain data) and
with valid ones.
Train: plain ``ValueError``. Held out: the package's own ``errors.InvalidInput`` (a
``ValueError`` subclass in ``pkg/errors.py``) must be raised. Difficulty = number of
functions (1–2; 4–5; 12–14 across modules, > 30 steps). Infeasible: the rules reject an
empty list that a protected visible test requires to be accepted.
"""

from __future__ import annotations

import random
from typing import Any

from ...cards import TaskCard
from .._registry import Template, Variant, register
from . import _kit
from ._recipes import FnSpec, draw
from ._repo import call_all, module_text, visible_test

# rule kind -> (text, invalid values, guard source with X for the parameter)
RULES: dict[str, tuple[str, list[Any], str]] = {
    "list": ("must be a non-empty list", [[], "1,2,3"],
             "if not isinstance(X, list) or not X:"),
    "posint": ("must be a positive integer", [0, -2, 2.5],
               "if not isinstance(X, int) or isinstance(X, bool) or X <= 0:"),
    "pct": ("must be between 0 and 100", [-5, 150], "if not 0 <= X <= 100:"),
    "nonneg": ("must not be negative", [-10], "if X < 0:"),
    "nonzero": ("must not be zero", [0], "if X == 0:"),
}
PARAM_RULES = {"values": "list", "prices": "list", "quantities": "list", "width": "posint",
               "size": "posint", "years": "posint", "discount_pct": "pct", "rate_pct": "pct",
               "pass_mark": "pct", "principal": "nonneg", "amount": "nonneg", "old": "nonzero"}
SIZES = {1: (1, 2, 1), 2: (4, 5, 2), 3: (12, 14, 5)}

_CHECKS = '''
PROBE = """
import importlib


def probe(mod, fn, args):
    try:
        getattr(importlib.import_module(mod), fn)(*args)
    except Exception as exc:
        return {"raised": True, "value_error": isinstance(exc, ValueError),
                "type": type(exc).__name__, "message": str(exc)}
    return {"raised": False}
"""


def check(subject, mod, fn, bad, good):
    subject.define(PROBE)
    for args, param in bad:
        got = subject.call("__ceiling__:probe", f"{PKG}.{mod}", fn, list(args))
        assert got["raised"], f"{fn}{args!r} accepted invalid {param!r}"
        assert got["value_error"], f"{fn}{args!r} raised {got['type']}, not ValueError"
        if ERROR != "ValueError":
            assert got["type"] == ERROR, f"{fn}{args!r} raised {got['type']}, not {ERROR}"
        assert type(got["message"]) is str and param in got["message"], (
            f"{fn}{args!r}: the message {got['message']!r} does not name {param!r}")
    for args, want in good:
        got = outcome(subject, f"{PKG}.{mod}:{fn}", *args)
        assert same(got, want), f"{fn}{args!r} returned {got!r}, expected {want!r}"
'''


def _rules(spec: FnSpec) -> list[tuple[str, str]]:
    """(param, rule kind) pairs for a function; clamp-style bounds get ``order``."""
    out = [(p, PARAM_RULES[p]) for p in spec.params if p in PARAM_RULES]
    if "low" in spec.params and "high" in spec.params:
        out.append(("low", "order"))
    return out


def _bad_calls(spec: FnSpec, rules: list[tuple[str, str]]) -> list[tuple[tuple[Any, ...], str]]:
    base = spec.cases[0]
    bad = []
    for p, kind in rules:
        i = spec.params.index(p)
        if kind == "order":
            lo, hi = spec.params.index("low"), spec.params.index("high")
            args = list(base)
            args[lo], args[hi] = max(base[lo], base[hi]) + 3, min(base[lo], base[hi])
            bad.append((tuple(args), "low"))
            continue
        for v in RULES[kind][1]:
            bad.append((tuple(base[:i]) + (v,) + tuple(base[i + 1:]), p))
    return bad


def _guarded(spec: FnSpec, rules: list[tuple[str, str]], error: str) -> str:
    lines = spec.source.splitlines()
    guards = []
    for p, kind in rules:
        if kind == "order":
            guards += ["    if low > high:", f'        raise {error}("low must not exceed high")']
        else:
            text, _, cond = RULES[kind]
            guards += [f"    {cond.replace('X', p)}", f'        raise {error}("{p} {text}")']
    return "\n".join(lines[:2] + guards + lines[2:]) + "\n"


def _describe(rules: list[tuple[str, str]]) -> str:
    return "; ".join("`low` must not exceed `high`" if k == "order"
                     else f"`{p}` {RULES[k][0]}" for p, k in rules)


@register
class AddValidation(Template):
    family = "repo_refactor"
    name = "add-validation"
    summary = "Add input validation (ValueError naming the parameter) to library functions."
    difficulties = (1, 2, 3)
    horizons = {1: "short", 2: "medium", 3: "long"}  # noqa: RUF012
    tags = ("robustness", "validation")

    def generate(self, rng: random.Random, difficulty: int, variant: Variant) -> TaskCard:
        custom = variant == "heldout"
        infeasible = variant == "infeasible"
        error = "InvalidInput" if custom else "ValueError"
        lo, hi, nmods = SIZES[difficulty]
        taken: set[str] = set()
        pkg = _kit.package_name(rng)
        taken |= {pkg, "errors"}
        mods = _kit.module_names(rng, nmods, taken)
        jobs: list[tuple[str, FnSpec, list[tuple[str, str]]]] = []
        for i in range(rng.randint(lo, hi)):
            name = _kit.ident(rng, taken)
            spec = draw(rng, name, recipe="count_above" if infeasible and i == 0 else None)
            while not _rules(spec):
                spec = draw(rng, name)
            jobs.append((mods[i % nmods], spec, _rules(spec)))
        before = {f"{pkg}/__init__.py": f'"""{pkg}: calculators used by the billing service."""\n'}
        if custom:
            before[f"{pkg}/errors.py"] = module_text(
                f"Errors raised by {pkg}.", [],
                ['class InvalidInput(ValueError):\n    """An argument broke a documented rule."""\n'])
        after = dict(before)
        for mod in mods:
            mine = [j for j in jobs if j[0] == mod]
            if not mine:
                continue
            doc = f"{mod.capitalize()} calculators."
            before[f"{pkg}/{mod}.py"] = module_text(doc, [], [s.source for _, s, _ in mine])
            after[f"{pkg}/{mod}.py"] = module_text(
                doc, ["from .errors import InvalidInput"] if custom else [],
                [_guarded(s, r, error) for _, s, r in mine])
        good_calls = [(f"{pkg}.{m}", s.name, c) for m, s, _ in jobs for c in s.cases[:3]]
        good_res = call_all(before, good_calls)
        bad_all = [(f"{pkg}.{m}", s.name, a) for m, s, r in jobs for a, _ in _bad_calls(s, r)]
        observed = call_all(before, bad_all)
        tests, k = [], 0
        for m, s, r in jobs:
            bad = _bad_calls(s, r)
            if all(str(o).startswith("<ValueError") for o in observed[k:k + len(bad)]):
                # the hidden test would not fail on the untouched code: a generator bug
                raise RuntimeError(f"add-validation: {s.name} already rejects every bad input")
            k += len(bad)
            good = [(c, res) for (mm, f, c), res in zip(good_calls, good_res) if f == s.name]
            tests.append(f"\n\ndef test_validates_{s.name}(subject):\n"
                         f"    check(subject, {m!r}, {s.name!r}, {bad!r}, {good!r})\n")
        hidden = (_kit.TEST_PRELUDE + f"\nPKG, ERROR = {pkg!r}, {error!r}\n" + _CHECKS
                  + "".join(tests))
        tname = f"tests/test_{pkg}.py"
        vis_calls, vis_res = good_calls[::3][:6], good_res[::3][:6]
        visible = visible_test(pkg, vis_calls, vis_res)
        reason = None
        if infeasible:
            m, s, _ = jobs[0]
            empty = ([],) + tuple(s.cases[0][1:])
            visible += (f"\n\ndef test_{s.name}_accepts_empty():\n"
                        f'    """Upstream callers rely on an empty list giving 0."""\n'
                        f"    assert {pkg}.{m}.{s.name}(*{empty!r}) == 0\n")
            if f"import {pkg}.{m}  " not in visible:
                anchor = "sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))\n"
                visible = visible.replace(anchor, f"{anchor}import {pkg}.{m}  # noqa: E402\n", 1)
            reason = (f"the rules require {s.name} to reject an empty list, but a protected "
                      f"visible test requires {s.name}([], ...) to return 0")
        workspace = {**before, tname: visible}
        fault, chmod = _kit.fault_for(rng, variant, f"{pkg}/{jobs[0][0]}.py")
        spec_lines = " ".join(f"`{m}.{s.name}`: {_describe(r)}." for m, s, r in jobs)
        raise_what = (f"`{pkg}.errors.InvalidInput` (already defined in `{pkg}/errors.py`)"
                      if custom else "`ValueError`")
        instruction = (
            f"Add input validation to the package `{pkg}`. For each function below, when an "
            f"argument breaks a rule, raise {raise_what} with a message that names the "
            f"parameter (e.g. \"width must be a positive integer\"). Valid inputs must "
            f"give exactly the same results as now. Rules — {spec_lines} The visible tests in "
            f"`tests/` must keep passing (do not edit them). Submit when done.")
        changed = {p: x for p, x in after.items() if before.get(p) != x}
        return _kit.assemble(
            self, difficulty=difficulty, variant=variant, instruction=instruction,
            workspace=workspace, tests={"test_task.py": hidden},
            test_ids=_kit.test_ids("test_task.py", hidden),
            solution=_kit.GIVE_UP if infeasible else _kit.oracle_script(
                changed, chmod=chmod, note=f"validate {len(jobs)} function(s)"),
            protected=[tname], faults=[fault] if fault else [], infeasible_reason=reason,
            tags=[f"structure:{'custom-error' if custom else 'valueerror'}",
                  f"functions:{len(jobs)}"])
