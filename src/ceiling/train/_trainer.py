"""The training loop: stages in order, a band sampler per stage, an optimizer step per
iteration, accounting, metrics (JSONL + TensorBoard) and exact-resume checkpoints.

Determinism: every step's randomness comes from (config seed, global step) — the card
draw from the sampler's saved RNG, the sampling seed passed to the rollout — so a run
killed at any moment and resumed from its last checkpoint redoes the lost steps exactly
and ends with the same adapter as an uninterrupted run (tests/train/test_trainer.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .._errors import ConfigError
from ..verify import RewardSpec
from ._accounting import Accounting
from ._alarm import HackAlarm, integrity_metrics
from ._cards import stage_arms
from ._checkpoint import (
    TrainerState,
    Unit,
    check_same_base,
    latest_checkpoint,
    load_trainer_state,
    read_meta,
    restore_rng,
    state_from_blob,
    write_checkpoint,
)
from ._config import StageConfig, TrainConfig
from ._grpo import GRPOSettings
from ._loss import LossConfig
from ._optim import Optimizer, RolloutFn, StepContext, optimizer_factory
from ._sampler import BandSampler

# (model, tokenizer, config, stage, backend) -> RolloutFn; a test seam
RolloutFactory = Callable[[Any, Any, TrainConfig, StageConfig, str], RolloutFn]


@dataclass
class StepInfo:
    step: int
    total: int
    stage: str
    metrics: dict[str, float]
    unit: dict[str, Any]


@dataclass
class TrainSummary:
    run_dir: str
    steps: int
    checkpoint: str | None
    base: str
    base_sha256: str
    backend: str
    unit: dict[str, Any]
    last_metrics: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    stopped_by_alarm: str | None = None  # the red-team alarm's message when it stopped the run


def step_seed(seed: int, step: int) -> int:
    return (seed * 1_000_003 + step * 7919 + 17) % (2**31 - 1)


def default_rollout(model: Any, tok: Any, cfg: TrainConfig, stage: StageConfig,
                    backend: str) -> RolloutFn:
    from ._rollouts import live_policy, make_rollout
    from ._verdict_cache import VerdictCache

    policy = live_policy(model, tok, f"hf:{cfg.base}+adapter(training)")
    return make_rollout(policy, harness_format=cfg.harness_format,
                        temperature=cfg.sampling.temperature, top_p=cfg.sampling.top_p,
                        max_new_tokens=cfg.sampling.max_new_tokens, backend=backend,
                        workers=cfg.workers, reward=stage.reward,
                        cache=VerdictCache() if cfg.verdict_cache else None,
                        history_turns=cfg.history_turns, executor=cfg.executor,
                        ray_address=cfg.ray_address)


class Trainer:
    """Runs a :class:`TrainConfig` into ``run_dir`` (checkpoints/, metrics.jsonl, tb/)."""

    def __init__(self, cfg: TrainConfig, run_dir: Path, *,
                 rollout_factory: RolloutFactory | None = None,
                 on_step: Callable[[StepInfo], None] | None = None,
                 stop_after: int | None = None, time_budget_s: float | None = None) -> None:
        self.cfg = cfg
        self.run_dir = Path(run_dir)
        self.rollout_factory = rollout_factory or default_rollout
        self.on_step = on_step
        self.stop_after = stop_after  # test hook: raise KeyboardInterrupt after N steps
        self.time_budget_s = time_budget_s  # stop (with a checkpoint) once this is spent
        self.notes: list[str] = []

    # -- set-up ---------------------------------------------------------------------------
    def _setup(self) -> None:
        from ..basemodel import weights_sha256
        from ._model import attach_lora, base_path, check_device, load_base

        cfg = self.cfg
        self.device = check_device(cfg.device)
        self.arms = [stage_arms(s) for s in cfg.stages]  # empty mixes fail before any work
        self.base_dir = base_path(cfg.base)
        model, self.tok = load_base(self.base_dir, self.device)
        self.base_sha = weights_sha256(self.base_dir)
        self.model = attach_lora(model, r=cfg.lora.r, alpha=cfg.lora.alpha,
                                 dropout=cfg.lora.dropout, seed=cfg.seed)
        self.model.eval()
        self.params = sum(p.numel() for p in self.model.parameters())
        settings = GRPOSettings(
            lr=cfg.lr, group_size=cfg.group_size, updates_per_batch=cfg.updates_per_batch,
            micro_batch=cfg.micro_batch, max_grad_norm=cfg.max_grad_norm,
            temperature=cfg.sampling.temperature,
            loss=LossConfig(**cfg.loss.model_dump()))
        self.opt: Optimizer = optimizer_factory(cfg.optimizer)(
            model=self.model, settings=settings, pad_id=self.tok.pad_token_id, config=cfg,
            tokenizer=self.tok)
        self.backend: str = cfg.backend
        if self.rollout_factory is default_rollout:
            from ._rollouts import pick_backend

            self.backend, note = pick_backend(cfg.backend)
            if note:
                self.notes.append(note)

    def _sampler(self, i: int) -> BandSampler:
        b = self.cfg.band
        return BandSampler([a for a in self.arms[i]], low=b.low, high=b.high,
                           explore=b.explore, decay=b.decay, seed=self.cfg.seed * 1000 + i,
                           seed_base=i * 10_000_000)

    def _meta(self, metrics: dict[str, float]) -> dict[str, Any]:
        return {"base": str(self.base_dir), "base_spec": self.cfg.base,
                "base_sha256": self.base_sha, "config": self.cfg.model_dump(mode="json"),
                "optimizer": self.opt.name, "metrics": metrics, "params": self.params}

    def _resume(self) -> tuple[TrainerState, dict[str, Any] | None]:
        ck = latest_checkpoint(self.run_dir)
        if ck is None:
            return TrainerState(), None
        check_same_base(read_meta(ck), self.base_sha, where=str(ck))
        from peft import set_peft_model_state_dict
        from safetensors.torch import load_file

        weights = load_file(str(ck / "adapter" / "adapter_model.safetensors"))
        set_peft_model_state_dict(self.model, weights)
        blob = load_trainer_state(ck)
        self.opt.load_state_dict(blob["optimizer"])
        restore_rng(blob)
        state = state_from_blob(blob)
        self._truncate_metrics(state.global_step)
        return state, blob["sampler"]

    def _truncate_metrics(self, upto: int) -> None:
        f = self.run_dir / "metrics.jsonl"
        if not f.is_file():
            return
        keep = [ln for ln in f.read_text().splitlines()
                if ln.strip() and json.loads(ln).get("step", 0) <= upto]
        f.write_text("".join(ln + "\n" for ln in keep))

    # -- the loop -------------------------------------------------------------------------
    def run(self, *, resume: bool = False) -> TrainSummary:
        """Train every stage in order (or resume the last checkpoint) and return what the
        run produced. Phases: set-up, open the run folder, each stage's steps (draw cards,
        one optimizer step, accounting, metrics, checkpoint), summary."""
        self._setup()
        state, sampler_state = self._open(resume)
        log = _MetricsLog(self.run_dir)  # opened before the clock starts, as the wall time says
        loop = _Loop(state, Accounting.resume(state, self.params),
                     HackAlarm(self.cfg.redteam_alarm), log,
                     ck_path=latest_checkpoint(self.run_dir) if resume else None)
        try:
            for si in range(state.stage_index, len(self.cfg.stages)):
                self._run_stage(loop, si, sampler_state)
                sampler_state = None
                if loop.out_of_time or loop.alarm_stop:
                    break
        finally:
            loop.log.close()
        return TrainSummary(str(self.run_dir), state.global_step,
                            str(loop.ck_path) if loop.ck_path else None, str(self.base_dir),
                            self.base_sha, self.backend, asdict(state.unit), loop.last,
                            self.notes, loop.alarm_stop)

    def _open(self, resume: bool) -> tuple[TrainerState, dict[str, Any] | None]:
        """The run folder, and the state to start from (a fresh one unless ``resume``)."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if not resume and latest_checkpoint(self.run_dir) is not None:
            raise ConfigError(f"{self.run_dir} already holds checkpoints",
                              where=str(self.run_dir),
                              fix="pass --resume to continue it, or choose another --out")
        state, sampler_state = self._resume() if resume else (TrainerState(), None)
        if resume and sampler_state is None:
            self.notes.append("nothing to resume: no checkpoint yet; starting fresh")
        return state, sampler_state

    def _run_stage(self, loop: _Loop, si: int, sampler_state: dict[str, Any] | None) -> None:
        """Steps of stage ``si`` until its step (or rollout) budget, the time budget or the
        red-team alarm stops it."""
        stage = self.cfg.stages[si]
        sampler = self._sampler(si)
        if sampler_state is not None and sampler_state.get("stage") == si:
            sampler.load_state_dict(sampler_state["state"])
        else:
            loop.state.stage_step = 0
        rollout = self.rollout_factory(self.model, self.tok, self.cfg, stage, self.backend)
        rollouts_in_stage = 0
        while loop.state.stage_step < stage.steps:
            if stage.max_rollouts and rollouts_in_stage >= stage.max_rollouts:
                break
            m, n = self._step(loop, si, sampler, rollout)
            rollouts_in_stage += n
            loop.log.write(loop.state.global_step, stage.name, m, loop.acct.unit)
            if self.on_step:
                self.on_step(StepInfo(loop.state.global_step, self.cfg.total_steps, stage.name,
                                      m, asdict(loop.acct.unit)))
            end_of_stage = loop.state.stage_step >= stage.steps
            loop.out_of_time = (self.time_budget_s is not None and
                                loop.acct.elapsed() >= self.time_budget_s)
            if loop.state.global_step % self.cfg.checkpoint_every == 0 or end_of_stage or \
                    loop.out_of_time or loop.alarm_stop:
                self._checkpoint(loop, si, sampler, m, end_of_stage)
            loop.done_here += 1
            if self.stop_after is not None and loop.done_here >= self.stop_after:
                raise KeyboardInterrupt
            if loop.out_of_time:
                self.notes.append(f"time budget of {self.time_budget_s:.0f} s spent "
                                  f"after {loop.state.global_step} steps")
                break
            if loop.alarm_stop:
                break

    def _step(self, loop: _Loop, si: int, sampler: BandSampler,
              rollout: RolloutFn) -> tuple[dict[str, float], int]:
        """One optimizer step on freshly drawn cards: its metrics and its rollout count."""
        state = loop.state
        t0 = time.perf_counter()
        cards = sampler.draw(self.cfg.cards_per_step)
        ctx = StepContext(state.global_step, cards, rollout,
                          step_seed(self.cfg.seed, state.global_step))
        res = self.opt.step(ctx)
        sampler.update(res.trajectories)
        loop.acct.add(res)
        state.global_step += 1
        state.stage_step += 1
        state.stage_index = si
        dt = time.perf_counter() - t0
        m = dict(res.metrics)
        m.update(step_s=dt, in_band=sampler.in_band(),
                 tokens_per_s=sum(len(x.token_ids) for t in res.trajectories
                                  for x in t.turns) / max(dt, 1e-9))
        loop.alarm_stop = self._integrity(loop.alarm, state.global_step, res.trajectories, m)
        loop.last = m
        return m, len(res.trajectories)

    def _checkpoint(self, loop: _Loop, si: int, sampler: BandSampler, m: dict[str, float],
                    end_of_stage: bool) -> None:
        """Save adapter, optimizer, sampler and state; at the end of a stage the saved state
        points at the next stage."""
        loop.state.card_ids = loop.acct.card_ids()
        nxt = loop.state if not end_of_stage else _next_stage(loop.state, si)
        loop.ck_path = write_checkpoint(
            self.run_dir, model=self.model, optimizer_state=self.opt.state_dict(),
            sampler_state={"stage": si, "state": sampler.state_dict()}, state=nxt,
            meta=self._meta(m), keep=self.cfg.keep_checkpoints)

    def _integrity(self, alarm: HackAlarm, step: int, trajectories: Any,
                   m: dict[str, float]) -> str | None:
        """Add the step's integrity metrics to ``m`` and feed the red-team alarm; returns
        the alarm's message when it stops the run (a warning is logged and noted)."""
        m.update(integrity_metrics(trajectories))
        ev = alarm.update(step, m)
        if ev is None:
            return None
        from ._rollouts import warn

        warn(ev.message)
        self.notes.append(ev.message)
        return ev.message if ev.stop else None


class _MetricsLog:
    """``metrics.jsonl`` (one line per step, with the units) and TensorBoard scalars."""

    def __init__(self, run_dir: Path) -> None:
        self.writer = _tb_writer(run_dir / "tb")
        self.f = (run_dir / "metrics.jsonl").open("a")

    def write(self, step: int, stage: str, m: dict[str, float], unit: Unit) -> None:
        rec = {"step": step, "stage": stage, **m, "unit": asdict(unit)}
        self.f.write(json.dumps(rec, sort_keys=True) + "\n")
        self.f.flush()
        if self.writer is not None:
            for k, v in m.items():
                self.writer.add_scalar(f"train/{k}", v, step)
            self.writer.add_scalar("unit/rollouts", unit.rollouts, step)

    def close(self) -> None:
        self.f.close()
        if self.writer is not None:
            self.writer.close()


@dataclass
class _Loop:
    """What one call of :meth:`Trainer.run` carries from step to step."""

    state: TrainerState
    acct: Accounting
    alarm: HackAlarm
    log: _MetricsLog
    ck_path: Path | None = None
    last: dict[str, float] = field(default_factory=dict)
    done_here: int = 0  # steps run by this process
    out_of_time: bool = False
    alarm_stop: str | None = None  # the alarm's message when it stopped the run


def _next_stage(state: TrainerState, si: int) -> TrainerState:
    """The state as saved at the end of stage ``si``: resume starts the next stage."""
    return TrainerState(global_step=state.global_step, stage_index=si + 1, stage_step=0,
                        unit=state.unit, card_ids=state.card_ids)


def _tb_writer(path: Path) -> Any:
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:  # pragma: no cover - tensorboard is a dependency
        return None
    return SummaryWriter(str(path))


__all__ = ["RewardSpec", "StepInfo", "TrainSummary", "Trainer", "step_seed"]
