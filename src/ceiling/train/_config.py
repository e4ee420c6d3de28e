"""The training config (YAML), validated by pydantic.

A run is a list of **stages**, each a task mix, a reward spec and a budget; the optimizer
(``grpo`` or ``es``) and its knobs are shared. Unknown keys are errors that name the key and
the nearest valid one. Example::

    base: builtin:tiny
    optimizer: grpo
    lr: 0.001
    group_size: 8
    cards_per_step: 4
    stages:
      - name: demo
        tags: [demo]            # or templates: [terminal_ops/demo-copy-v1, ...] / family
        steps: 40
        reward: {process_weight: 0.0}
    redteam_alarm: {max_hack_share: 0.2, window: 5, action: warn}   # the default
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .._errors import ConfigError
from .._yaml import first_error, load_yaml
from ..verify import RewardSpec


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LoraSettings(_M):
    r: int = Field(16, ge=1, le=1024)
    alpha: int = Field(32, ge=1)
    dropout: float = Field(0.0, ge=0.0, lt=1.0)


class LossSettings(_M):
    beta: float = Field(0.04, ge=0.0)
    clip_low: float = Field(0.2, gt=0.0, lt=1.0)
    clip_high: float = Field(0.2, gt=0.0)
    aggregation: Literal["token", "sequence"] = "token"


class SamplingSettings(_M):
    """How rollouts sample. ``temperature`` 0 is greedy (ES only: GRPO needs spread);
    ``top_p`` < 1 is nucleus sampling (ES only: GRPO recomputes full-softmax log-probs)."""

    temperature: float = Field(1.0, ge=0.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    max_new_tokens: int = Field(32, ge=1, le=4096)


class BandSettings(_M):
    low: float = Field(0.1, ge=0.0, le=1.0)
    high: float = Field(0.9, ge=0.0, le=1.0)
    explore: float = Field(0.1, ge=0.0, le=1.0)
    decay: float = Field(0.9, gt=0.0, le=1.0)


class AlarmSettings(_M):
    """The red-team alarm (see ``ceiling.train._alarm``): when more than ``max_hack_share``
    of the episodes of the last ``window`` steps end ``hack_detected``, ``warn`` (log and
    go on) or ``stop`` (checkpoint, then end the run; resumable)."""

    enabled: bool = True
    max_hack_share: float = Field(0.2, ge=0.0, le=1.0)
    window: int = Field(5, ge=1)
    action: Literal["warn", "stop"] = "warn"


class StageConfig(_M):
    """One stage: which cards (templates, a family, tags, a task-mix file or a folder of
    card folders), which difficulties and variants, how they are rewarded and for how
    long."""

    name: str
    templates: list[str] = Field(default_factory=list)
    family: str | None = None
    tags: list[str] = Field(default_factory=list)
    mix: str | None = None  # a task_mix.yaml (templates weighted by type / horizon)
    # a folder of card folders (ceiling synth / ceiling import output) or one card folder:
    # every card is an arm of its own (its pass rate steers the band sampler)
    cards: str | None = None
    difficulties: list[int] | None = None
    variants: list[Literal["train", "fault", "infeasible"]] = Field(
        default_factory=lambda: ["train"])  # type: ignore[arg-type]
    reward: RewardSpec = Field(default_factory=RewardSpec)
    steps: int = Field(20, ge=0)
    max_rollouts: int | None = Field(None, ge=1)


class TrainConfig(_M):
    """A training run as read from YAML (docs/training.md): the frozen base, the optimizer
    (GRPO or ES) and its settings, the LoRA adapter, sampling, the stages in order (each a
    task mix, steps and a reward spec), checkpointing and where rollouts run. Unknown keys
    are errors that name the key and the nearest valid one."""

    base: str = "builtin:tiny"
    optimizer: Literal["grpo", "es"] = "grpo"
    seed: int = 0
    device: str = "cpu"
    lr: float = Field(1e-3, gt=0.0)
    group_size: int = Field(8, ge=2)
    cards_per_step: int = Field(4, ge=1)
    updates_per_batch: int = Field(1, ge=1)
    micro_batch: int = Field(64, ge=1)
    max_grad_norm: float = Field(1.0, gt=0.0)
    lora: LoraSettings = Field(default_factory=LoraSettings)  # type: ignore[arg-type]
    loss: LossSettings = Field(default_factory=LossSettings)  # type: ignore[arg-type]
    sampling: SamplingSettings = Field(default_factory=SamplingSettings)  # type: ignore[arg-type]
    band: BandSettings = Field(default_factory=BandSettings)  # type: ignore[arg-type]
    harness_format: Literal["line", "json", "bash"] = "line"
    history_turns: int | None = Field(6, ge=1)  # turns shown to the policy (None: all)
    backend: Literal["namespace", "local"] = "namespace"
    workers: int = Field(4, ge=1)
    executor: Literal["local", "ray"] = "local"  # where env steps run (docs/scale-out.md)
    ray_address: str | None = None  # auto | HOST:PORT (default: $CEILING_RAY_ADDRESS)
    verdict_cache: bool = True  # identical episodes reuse one verdict (files-graded cards)
    checkpoint_every: int = Field(10, ge=1)
    keep_checkpoints: int = Field(3, ge=1)
    es: dict[str, Any] = Field(default_factory=dict)  # settings read by the ES optimizer
    redteam_alarm: AlarmSettings = Field(default_factory=AlarmSettings)  # type: ignore[arg-type]
    stages: list[StageConfig] = Field(min_length=1)

    @field_validator("stages")
    @classmethod
    def _unique_names(cls, v: list[StageConfig]) -> list[StageConfig]:
        names = [s.name for s in v]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"stage names must be unique; repeated: {sorted(dup)}")
        return v

    @model_validator(mode="after")
    def _grpo_sampling(self) -> TrainConfig:
        if self.optimizer == "grpo" and self.sampling.temperature <= 0:
            raise ValueError("sampling.temperature must be > 0 for GRPO (greedy groups have "
                             "no spread to learn from); use 1.0, or optimizer: es")
        if self.optimizer == "grpo" and self.sampling.top_p < 1.0:
            raise ValueError("sampling.top_p must be 1.0 for GRPO (it recomputes log-probs "
                             "of the full softmax); use 1.0, or optimizer: es")
        return self

    @property
    def total_steps(self) -> int:
        return sum(s.steps for s in self.stages)


def config_from_dict(data: Any, where: str = "config") -> TrainConfig:
    """Validate a parsed YAML mapping; errors are one :class:`ConfigError` naming the key."""
    if not isinstance(data, dict):
        raise ConfigError("a training config must be a YAML mapping", where=where,
                          fix="start from docs/training.md's example")
    try:
        return TrainConfig.model_validate(data)
    except ValidationError as e:
        kind, dotted, hint, err = first_error(e, TrainConfig)
        dotted = "" if dotted == "(top level)" else dotted
        if kind == "extra_forbidden":
            raise ConfigError(f"unknown key {dotted!r}", where=where,
                              fix=f"did you mean {hint!r}?" if hint else
                              "remove it (see docs/training.md)") from None
        raise ConfigError(f"{dotted or 'config'}: {err['msg']}", where=where,
                          fix="see docs/training.md for the valid values") from None


def load_config(path: Path | str) -> TrainConfig:
    """Read and validate a training config; errors name the file (and line), key and fix."""
    data = load_yaml(path, what=f"training config {str(path)!r} does not exist",
                     missing_fix="pass a YAML file, e.g. docs/training.md's example")
    return config_from_dict(data, where=str(path))
