"""A generated library package: several modules, each a few recipe functions.

Shared by the ``fix-bug``, ``split-module`` and ``add-validation`` templates. Layout
``flat`` puts modules at ``pkg/<module>.py``; ``src`` (a held-out layout for some
templates) puts the package under ``src/pkg/``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from . import _kit
from ._recipes import FnSpec, draw
from ._repo import Call, module_text


@dataclass
class LibRepo:
    pkg: str
    modules: list[tuple[str, list[FnSpec]]] = field(default_factory=list)
    root: str = ""  # "" or "src/"

    def path(self, mod: str) -> str:
        return f"{self.root}{self.pkg}/{mod}.py"

    def functions(self) -> list[tuple[str, FnSpec]]:
        return [(m, f) for m, fns in self.modules for f in fns]

    def calls(self, fns: list[tuple[str, FnSpec]] | None = None) -> list[Call]:
        return [(f"{self.pkg}.{m}", f.name, c) for m, f in (fns or self.functions())
                for c in f.cases]


def build_library(rng: random.Random, n_modules: int, per_module: tuple[int, int] = (2, 3),
                  *, root: str = "", need: tuple[str, ...] = ()) -> LibRepo:
    taken: set[str] = set()
    pkg = _kit.package_name(rng)
    taken.add(pkg)
    repo = LibRepo(pkg, root=root)
    for mod in _kit.module_names(rng, n_modules, taken):
        fns = [draw(rng, _kit.ident(rng, taken), need=need)
               for _ in range(rng.randint(*per_module))]
        repo.modules.append((mod, fns))
    return repo


def render_library(repo: LibRepo, overrides: dict[str, str] | None = None,
                   only: set[str] | None = None) -> dict[str, str]:
    """Files of the package; ``overrides`` maps a function name to replacement source;
    ``only`` restricts the output to those module names."""
    overrides = overrides or {}
    files = {f"{repo.root}{repo.pkg}/__init__.py":
             f'"""{repo.pkg}: a small library of business rules."""\n'}
    for mod, fns in repo.modules:
        if only is not None and mod not in only:
            continue
        files[repo.path(mod)] = module_text(
            f"{mod.capitalize()} rules of {repo.pkg}.", [],
            [overrides.get(f.name, f.source) for f in fns])
    return files
