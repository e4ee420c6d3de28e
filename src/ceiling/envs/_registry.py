"""The registry of environment templates, and ``make``.

A template is a procedural generator of task cards for one task shape. It has a versioned
id (``terminal_ops/log-rotate-v1``), a difficulty knob (``difficulties``; higher difficulty
means a longer horizon), and variants:

- ``train``: the parameter ranges and layouts used for training;
- ``heldout``: a structural variant never produced for ``train`` (another parameter range or
  layout), to measure generalisation;
- ``fault``: a train-range card with faults injected (see ``TaskCard.faults``);
- ``infeasible``: a twin whose right move is ``give_up`` (``feasible: false``).

Card ids are ``TEMPLATE_ID@s{seed}-d{difficulty}-{variant}``.

Secret entropy: ``make`` seeds the generator with an HMAC of (installation secret, template
id, seed, difficulty, variant) (see ``_secret``), so one installation always makes the same
card for the same arguments, and the seed plus the generator source are not enough to
recompute a card's expected values elsewhere.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from typing import ClassVar, Literal

from .._errors import ConfigError, nearest
from ..cards import TaskCard
from ._secret import card_rng

Variant = Literal["train", "heldout", "fault", "infeasible"]
VARIANTS: tuple[str, ...] = ("train", "heldout", "fault", "infeasible")
MAX_SEED = 2**32 - 1


class Template(ABC):
    """A procedural generator of task cards (one per ``family/name-vN``). ``generate`` is a
    pure function of (rng, difficulty, variant), so ``make(template_id, seed=...)`` returns
    the same card every time; ``@register`` adds the class to the registry."""

    family: ClassVar[str]
    name: ClassVar[str]
    version: ClassVar[int] = 1
    summary: ClassVar[str] = ""
    difficulties: ClassVar[tuple[int, ...]] = (1, 2, 3)
    # horizon of the oracle at each difficulty, e.g. {1: "short", 2: "medium", 3: "long"}
    horizons: ClassVar[dict[int, str]] = {}
    tags: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def template_id(cls) -> str:
        return f"{cls.family}/{cls.name}-v{cls.version}"

    @abstractmethod
    def generate(self, rng: random.Random, difficulty: int, variant: Variant) -> TaskCard:
        """Return a complete card (workspace, hidden tests, oracle solution) for these
        parameters. Must be a pure function of (rng state, difficulty, variant)."""


_REGISTRY: dict[str, type[Template]] = {}


def register(cls: type[Template]) -> type[Template]:
    """Class decorator: add a template to the registry (ids must be unique)."""
    tid = cls.template_id()
    if tid in _REGISTRY and _REGISTRY[tid] is not cls:
        raise ValueError(f"template id {tid!r} registered twice")
    _REGISTRY[tid] = cls
    return cls


def _load_families() -> None:
    import importlib

    for fam in ("terminal_ops", "repo_refactor", "multi_tool", "security_audit"):
        try:
            importlib.import_module(f"ceiling.envs.{fam}")
        except ModuleNotFoundError as e:
            if e.name != f"ceiling.envs.{fam}":
                raise


def templates(family: str | None = None) -> list[type[Template]]:
    """Every registered template (optionally of one family), sorted by id."""
    _load_families()
    out = [t for tid, t in sorted(_REGISTRY.items()) if family in (None, t.family)]
    if family is not None and not out:
        fams = sorted({t.family for t in _REGISTRY.values()})
        raise ConfigError(f"unknown family {family!r}", fix=f"use one of {fams}")
    return out


def get_template(template_id: str) -> type[Template]:
    _load_families()
    base = template_id.split("@", 1)[0]
    if base not in _REGISTRY:
        hint = nearest(base, list(_REGISTRY))
        raise ConfigError(f"unknown template {base!r}",
                          fix=f"did you mean {hint!r}?" if hint else "see `ceiling envs list`")
    return _REGISTRY[base]


def make(template_id: str, *, seed: int = 0, difficulty: int | None = None,
         variant: str = "train") -> TaskCard:
    """Generate one card. ``seed`` in [0, 2**32); ``difficulty`` one of the template's.
    The same arguments give the same card under one installation secret."""
    cls = get_template(template_id)
    if not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise ConfigError(f"seed {seed!r} is out of range", fix=f"use an integer in [0, {MAX_SEED}]")
    d = cls.difficulties[0] if difficulty is None else difficulty
    if d not in cls.difficulties:
        raise ConfigError(f"difficulty {d!r} is not offered by {cls.template_id()}",
                          fix=f"use one of {list(cls.difficulties)}")
    if variant not in VARIANTS:
        raise ConfigError(f"unknown variant {variant!r}", fix=f"use one of {list(VARIANTS)}")
    rng = card_rng(cls.template_id(), seed, d, variant)
    card = cls().generate(rng, d, variant)  # type: ignore[arg-type]
    card.id = f"{cls.template_id()}@s{seed}-d{d}-{variant}"
    card.template, card.seed, card.difficulty = cls.template_id(), seed, d
    card.split = "heldout" if variant == "heldout" else "train"
    if variant == "infeasible":
        card.feasible = False
    return card
