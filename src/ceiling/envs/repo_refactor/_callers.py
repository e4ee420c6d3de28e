"""A generated package whose modules call one function of a core module.

Shared by the ``rename-symbol`` and ``change-signature`` templates. Layout ``flat`` (train)
puts caller modules beside the core module and imports the function by name
(``from .core import f``); layout ``nested`` (held out) puts them in a ``services``
subpackage that calls it as an attribute (``from .. import core`` … ``core.f(...)``).
``pkg/api.py`` is the public API (re-exports the core functions) and is protected.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from . import _kit
from ._recipes import FnSpec, draw
from ._repo import Call, module_text

CALLERS_BY_DIFFICULTY = {1: (2, 3), 2: (6, 9), 3: (16, 22)}


@dataclass
class CallerRepo:
    pkg: str
    core: str
    layout: str  # "flat" | "nested"
    target: FnSpec
    others: list[FnSpec]
    callers: list[tuple[str, list[str]]] = field(default_factory=list)  # (module, functions)
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def sub(self) -> str:
        return f"{self.pkg}.services" if self.layout == "nested" else self.pkg

    def mod_path(self, mod: str) -> str:
        base = f"{self.pkg}/services" if self.layout == "nested" else self.pkg
        return f"{base}/{mod}.py"

    def caller_calls(self) -> list[Call]:
        return [(f"{self.sub}.{m}", fn, c) for m, fns in self.callers for fn in fns
                for c in self.target.cases[:3]]


def build(rng: random.Random, difficulty: int, layout: str, *, min_params: int = 1) -> CallerRepo:
    taken: set[str] = set()
    pkg = _kit.package_name(rng)
    core = rng.choice(("core", "engine", "common", "calc", "rules"))
    taken |= {pkg, core, "api", "services"}
    for _ in range(50):
        target = draw(rng, _kit.ident(rng, taken))
        if len(target.params) >= min_params:
            break
    others = [draw(rng, _kit.ident(rng, taken)) for _ in range(rng.randint(1, 2))]
    lo, hi = CALLERS_BY_DIFFICULTY[difficulty]
    repo = CallerRepo(pkg, core, layout, target, others)
    for mod in _kit.module_names(rng, rng.randint(lo, hi), taken):
        fns = [_kit.ident(rng, taken) for _ in range(rng.choice((1, 1, 2)))]
        repo.callers.append((mod, fns))
        for fn in fns:
            repo.labels[fn] = f"{mod}:{fn.split('_')[1]}"
    return repo


def render(repo: CallerRepo, *, core_defs: str, ref: str,
           args_for: Callable[[tuple[str, ...]], str]) -> dict[str, str]:
    """Files of the package. ``core_defs``: the target's def (plus any alias lines);
    ``ref``: the name callers use; ``args_for(params)``: the argument list callers pass."""
    pkg, t = repo.pkg, repo.target
    files: dict[str, str] = {}
    files[f"{pkg}/__init__.py"] = f'"""{pkg}: generated business rules. Public API: {pkg}.api."""\n'
    files[f"{pkg}/{repo.core}.py"] = module_text(
        f"Core rules of {pkg}.", [], [core_defs, *[o.source for o in repo.others]])
    exported = [t.name, *[o.name for o in repo.others]]  # api.py keeps the original names
    files[f"{pkg}/api.py"] = module_text(
        f"Public API of {pkg}: the names users import. Keep it stable.",
        [f"from .{repo.core} import {', '.join(sorted(exported))}"],
        [f"__all__ = {sorted(exported)!r}"])
    if repo.layout == "nested":
        files[f"{pkg}/services/__init__.py"] = '"""Services built on the core rules."""\n'
    for mod, fns in repo.callers:
        if repo.layout == "nested":
            imports = [f"from .. import {repo.core}"]
            call = f"{repo.core}.{ref}"
        else:
            imports = [f"from .{repo.core} import {ref}"]
            call = ref
        chunks = []
        params = ", ".join(t.params)
        for fn in fns:
            chunks.append(f"def {fn}({params}):\n"
                          f'    """Labelled result for the {mod} report."""\n'
                          f"    return ({repo.labels[fn]!r}, {call}({args_for(t.params)}))\n")
        files[repo.mod_path(mod)] = module_text(f"{mod.capitalize()} reports for {pkg}.",
                                                imports, chunks)
    return files

