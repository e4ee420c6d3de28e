"""The study config (YAML): one frozen base, a ladder of budgets, optimizers, seeds.

A study trains, for every optimizer named and every seed, one run from the same frozen base
on the same training stage, and evaluates the checkpoint at every rung of ``ladder``
(budgets in **rollouts**, the post-training unit) on held-out cards. Example
(``examples/study_tiny.yaml`` is the default for ``builtin:tiny``)::

    base: builtin:tiny
    seeds: [0, 1, 2]
    ladder: [32, 64, 128, 256]          # rollouts; every rung a multiple of each
                                        # optimizer's rollouts per step
    train:                              # training-config keys shared by every run
      lr: 0.001
      stages: [{name: demo, family: terminal_ops, tags: [demo], variants: [train]}]
    optimizers:                         # name -> training-config keys for it alone
      grpo: {cards_per_step: 4, group_size: 8}
      es: {cards_per_step: 2, es: {population: 4, episodes: 2}}
    eval: {per_template: 2, k: 8}
    fit: {threshold: 0.01}

Unknown keys are errors naming the key and the nearest valid one; the training parts are
validated by the trainer's own config (``ceiling.train.config_from_dict``) before any work.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .._errors import ConfigError, nearest


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EvalSettings(_M):
    per_template: int = Field(2, ge=1)  # held-out cards per (template, difficulty) arm
    k: int = Field(8, ge=1)  # samples per card: pass@1 and pass@k
    seed_base: int = Field(1_000_000_000, ge=0)  # card seeds (training draws far below)
    temperature: float = Field(1.0, gt=0.0)
    resamples: int = Field(2000, ge=100)


class FitSettings(_M):
    threshold: float = Field(0.01, gt=0.0)  # marginal held-out gain per doubling


class StudyConfig(_M):
    base: str = "builtin:tiny"
    seeds: list[int] = Field(default_factory=lambda: [0, 1, 2], min_length=1)
    ladder: list[int] = Field(min_length=1)
    train: dict[str, Any] = Field(default_factory=dict)
    optimizers: dict[str, dict[str, Any]] = Field(min_length=1)
    eval: EvalSettings = Field(default_factory=EvalSettings)  # type: ignore[arg-type]
    fit: FitSettings = Field(default_factory=FitSettings)  # type: ignore[arg-type]
    backend: str = "namespace"
    workers: int = Field(4, ge=1)

    @field_validator("ladder")
    @classmethod
    def _ladder(cls, v: list[int]) -> list[int]:
        if any(x < 1 for x in v) or sorted(set(v)) != v:
            raise ValueError("ladder must be strictly increasing positive rollout counts")
        return v

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, v: list[int]) -> list[int]:
        if len(set(v)) != len(v):
            raise ValueError("seeds must be distinct")
        return v

    def train_dict(self, optimizer: str, seed: int) -> dict[str, Any]:
        """The training config of one run: shared keys, the optimizer's keys, then the
        study's own (base, optimizer, seed, one stage whose length is the top rung)."""
        d: dict[str, Any] = json.loads(json.dumps(self.train))
        for k, v in self.optimizers[optimizer].items():
            if isinstance(v, dict) and isinstance(d.get(k), dict):
                d[k] = {**d[k], **v}
            else:
                d[k] = v
        d.update(base=self.base, optimizer=optimizer, seed=seed, backend=self.backend)
        d.setdefault("workers", self.workers)
        return d

    def digest(self) -> str:
        """A hash of everything that changes results (a resumed study must match it)."""
        blob = self.model_dump(mode="json")
        return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()[:16]


def rollouts_per_step(tcfg: Any) -> int:
    """Rollouts one optimizer step plays (GRPO: cards x group; ES: 2 x population x cards
    x episodes)."""
    if tcfg.optimizer == "es":
        from ..train import ESSettings

        s = ESSettings.from_dict(tcfg.es, where="optimizers.es.es")
        return 2 * s.population * tcfg.cards_per_step * s.episodes
    return int(tcfg.cards_per_step * tcfg.group_size)


def study_from_dict(data: Any, where: str = "study") -> StudyConfig:
    """Validate a parsed mapping (and every run's training config); one ConfigError names
    the bad key."""
    if not isinstance(data, dict):
        raise ConfigError("a study config must be a YAML mapping", where=where,
                          fix="start from examples/study_tiny.yaml")
    try:
        cfg = StudyConfig.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(x) for x in err["loc"])
        if err["type"] == "extra_forbidden":
            last = str(err["loc"][-1])
            owner: Any = StudyConfig
            if len(err["loc"]) > 1:
                owner = {"eval": EvalSettings, "fit": FitSettings}.get(str(err["loc"][0]),
                                                                      StudyConfig)
            hint = nearest(last, list(owner.model_fields))
            raise ConfigError(f"unknown key {loc!r}", where=where,
                              fix=f"did you mean {hint!r}?" if hint else
                              "remove it (see docs/study.md)") from None
        raise ConfigError(f"{loc or 'config'}: {err['msg']}", where=where,
                          fix="see docs/study.md for the valid values") from None
    from ..train import config_from_dict

    for name in cfg.optimizers:
        if name not in ("grpo", "es"):
            raise ConfigError(f"unknown optimizer {name!r} in optimizers", where=where,
                              fix="use grpo and/or es")
        for key in ("base", "optimizer", "seed", "stages"):
            if key in cfg.optimizers[name]:
                raise ConfigError(f"optimizers.{name}.{key} is set by the study", where=where,
                                  fix=f"set {key} at the top level (stages under train:)")
        td = cfg.train_dict(name, cfg.seeds[0])
        stages = td.get("stages")
        if not isinstance(stages, list) or len(stages) != 1:
            raise ConfigError("train.stages must hold exactly one stage", where=where,
                              fix="the study trains every run on one stage; its steps "
                                  "come from the ladder")
        td["stages"] = [{**stages[0], "steps": 1}]
        tcfg = config_from_dict(td, where=f"{where} (optimizers.{name})")
        per = rollouts_per_step(tcfg)
        bad = [r for r in cfg.ladder if r % per]
        if bad:
            raise ConfigError(f"ladder rungs {bad} are not multiples of {name}'s "
                              f"{per} rollouts per step", where=where,
                              fix=f"use multiples of {per} (or change cards_per_step, "
                                  "group_size, population or episodes)")
    return cfg


def load_study(path: Path | str) -> StudyConfig:
    import yaml

    p = Path(path)
    if p.name in PRESETS and not p.exists():
        return study_from_dict(PRESETS[p.name], where=f"preset {p.name}")
    if not p.is_file():
        raise ConfigError(f"study config {str(p)!r} does not exist", where=str(p),
                          fix="pass a YAML file such as examples/study_tiny.yaml, or a "
                              f"preset name: {sorted(PRESETS)}")
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as e:
        raise ConfigError(f"not valid YAML: {str(e).splitlines()[0]}", where=str(p),
                          fix="check the indentation and quoting") from None
    return study_from_dict(data, where=str(p))


_STAGE = {"name": "demo", "family": "terminal_ops", "tags": ["demo"], "variants": ["train"]}

# A study small enough for a test: 2 templates, 2 seeds, rungs of 2 and 4 rollouts, k = 2.
PRESETS: dict[str, dict[str, Any]] = {
    "tiny-test": {
        "base": "builtin:tiny", "seeds": [0, 1], "ladder": [2, 4],
        "train": {"lr": 0.002, "sampling": {"max_new_tokens": 24}, "workers": 2,
                  "stages": [{"name": "copy", "templates": [
                      "terminal_ops/demo-copy-v1", "terminal_ops/demo-create-v1"],
                      "variants": ["train"]}]},
        "optimizers": {"grpo": {"cards_per_step": 1, "group_size": 2},
                       "es": {"cards_per_step": 1, "es": {"population": 1, "episodes": 1}}},
        "eval": {"per_template": 1, "k": 2, "resamples": 200},
        "workers": 2,
    },
}

__all__ = ["PRESETS", "EvalSettings", "FitSettings", "StudyConfig", "load_study",
           "rollouts_per_step", "study_from_dict"]
