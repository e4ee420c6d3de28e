"""Suites: which cards an evaluation runs.

A suite is one of

- a family name (``terminal_ops``): the family's templates x variants x seeds, through
  ``envs.make``, in a fixed order (below), so the same ``--n`` always gives the same cards;
- a task-mix yaml (``ceiling.envs.TaskMix``): ``n`` cards sampled with ``card_seed``;
- a folder of card folders (each holding a ``task.yaml``), or one card folder.

Family order: for seed s = card_seed, card_seed + 1, ...; for rotation j in 0..3; for the
i-th template (sorted by id): variant ``VARIANTS[(i + j) % 4]`` at difficulty
``difficulties[(i + s) % len]``. So the first T cards (T templates) cover every template
once with rotating variants, and the first 4T cover every (template, variant) pair of one
seed, with the infeasible variant's feasible ``train`` twin always present.
"""

from __future__ import annotations

from pathlib import Path

from .._errors import ConfigError
from ..cards import TaskCard, load_card

DEFAULT_MIX_CARDS = 20


def family_cards(family: str, n: int | None = None, *, card_seed: int = 0) -> list[TaskCard]:
    """``n`` cards of a family (default: every template x variant of one seed)."""
    from ..envs import VARIANTS, make, templates

    tpls = templates(family)
    n = len(tpls) * len(VARIANTS) if n is None else n
    out: list[TaskCard] = []
    seed = card_seed
    while len(out) < n:
        for j in range(len(VARIANTS)):
            for i, t in enumerate(tpls):
                if len(out) >= n:
                    break
                d = t.difficulties[(i + seed) % len(t.difficulties)]
                out.append(make(t.template_id(), seed=seed, difficulty=d,
                                variant=VARIANTS[(i + j) % len(VARIANTS)]))
        seed += 1
    return out


def folder_cards(path: Path, n: int | None = None) -> list[TaskCard]:
    """Every card folder under ``path`` (sorted), or ``path`` itself if it is a card."""
    if (path / "task.yaml").is_file():
        cards = [load_card(path)]
    else:
        dirs = sorted(p for p in path.iterdir() if (p / "task.yaml").is_file())
        if not dirs:
            raise ConfigError(f"no card folder (with a task.yaml) in {path}", where="--suite",
                              fix="point --suite at a card folder or a folder of them")
        cards = [load_card(p) for p in dirs]
    return cards if n is None else cards[:n]


def mix_cards(path: Path, n: int | None, *, card_seed: int = 0) -> list[TaskCard]:
    from ..envs import TaskMix

    mix = TaskMix.from_yaml(path)
    return list(mix.sample(n or DEFAULT_MIX_CARDS, seed=card_seed))


def resolve_suite(suite: str, n: int | None = None, *, card_seed: int = 0) -> list[TaskCard]:
    """The cards of a suite (see the module docstring). Raises ConfigError for an unknown
    family, a missing path or ``n < 1``."""
    if n is not None and n < 1:
        raise ConfigError(f"--n {n} asks for no card", where="--n", fix="use --n 1 or more")
    p = Path(suite)
    if p.suffix in (".yaml", ".yml"):
        if not p.is_file():
            raise ConfigError(f"task-mix file {suite} does not exist", where="--suite",
                              fix="check the path")
        cards = mix_cards(p, n, card_seed=card_seed)
    elif p.is_dir():
        cards = folder_cards(p, n)
    elif "/" in suite or suite.startswith("."):
        raise ConfigError(f"suite folder {suite} does not exist", where="--suite",
                          fix="give a family name (e.g. terminal_ops), a task-mix .yaml or a "
                              "folder of cards")
    else:
        cards = family_cards(suite, n, card_seed=card_seed)
    if not cards:
        raise ConfigError(f"suite {suite!r} holds no card", where="--suite")
    ids = [c.id for c in cards]
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})[:3]
        raise ConfigError(f"suite {suite!r} holds duplicate card ids {dup}", where="--suite",
                          fix="give every card a unique id")
    return cards


__all__ = ["family_cards", "folder_cards", "mix_cards", "resolve_suite"]
