"""Evolution Strategies on the LoRA adapter: the second optimizer behind the trainer's seam.

One step (OpenAI-ES, Salimans et al. 2017, arXiv 1703.03864):

1. draw ``population`` Gaussian directions ``eps_i`` over the adapter's trainable tensors
   from the optimizer's own ``torch.Generator`` (its state is in ``state_dict``: a resumed
   run draws the same directions);
2. for each direction, run the step's cards at ``theta + sigma * eps_i`` and at
   ``theta - sigma * eps_i`` (antithetic pairs), ``episodes`` samples per card, all with the
   step's sampling seed (common random numbers: the pair differs only by the perturbation);
   the fitness of a perturbation is the mean verifier reward of its episodes;
3. replace the ``2 * population`` fitnesses by centered ranks in ``[-0.5, 0.5]`` (ties share
   their average rank, so a step where every perturbation earned the same moves nothing);
4. ``theta += lr / (2 * population * sigma) * sum_i (rank(F+_i) - rank(F-_i)) * eps_i``
   (plain gradient ascent, optionally with weight decay ``theta *= 1 - lr * weight_decay``).

Departures from the paper: no virtual batch norm, no noise table (directions come from the
generator; LoRA adapters are small), fitness is a batch mean over cards rather than one
episode. No gradients are computed: ``trained_tokens`` is 0 and the cost is all sampling.
Every episode of every perturbed policy is returned (the trainer's band sampler and unit
count them); ``reward_mean`` is the mean over perturbations, not the centre's reward.

Knobs come from the training config's ``es:`` mapping (unknown keys are errors naming the
nearest valid one): ``population`` (pairs, default 4), ``sigma`` (0.02), ``lr`` (0.02),
``episodes`` (samples per card per perturbation, 2), ``weight_decay`` (0.0).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

import torch

from .._errors import ConfigError, nearest
from ..rollout import Trajectory
from ._optim import StepContext, StepResult, register_optimizer


@dataclass(frozen=True)
class ESSettings:
    population: int = 4  # antithetic pairs per step (2x this many perturbed policies)
    sigma: float = 0.02
    lr: float = 0.02
    episodes: int = 2  # samples per card for each perturbed policy
    weight_decay: float = 0.0

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None, where: str = "es") -> ESSettings:
        """Validate the config's ``es:`` mapping (names the bad key and the nearest one)."""
        d = dict(d or {})
        names = [f.name for f in fields(cls)]
        for k in d:
            if k not in names:
                hint = nearest(str(k), names)
                raise ConfigError(f"unknown key '{where}.{k}'", where=where,
                                  fix=f"did you mean {hint!r}?" if hint else
                                  f"use some of {names}")
        try:
            s = cls(population=int(d.get("population", cls.population)),
                    sigma=float(d.get("sigma", cls.sigma)), lr=float(d.get("lr", cls.lr)),
                    episodes=int(d.get("episodes", cls.episodes)),
                    weight_decay=float(d.get("weight_decay", cls.weight_decay)))
        except (TypeError, ValueError) as e:
            raise ConfigError(f"{where}: {e}", where=where,
                              fix="population and episodes are integers; sigma, lr and "
                                  "weight_decay numbers") from None
        for name, ok in (("population", s.population >= 1), ("episodes", s.episodes >= 1),
                         ("sigma", s.sigma > 0), ("lr", s.lr > 0),
                         ("weight_decay", s.weight_decay >= 0)):
            if not ok:
                raise ConfigError(f"{where}.{name} = {getattr(s, name)!r} is out of range",
                                  where=where, fix="population, episodes >= 1; sigma, lr > 0; "
                                                   "weight_decay >= 0")
        return s


def centered_ranks(x: Sequence[float]) -> torch.Tensor:
    """Ranks of ``x`` scaled to ``[-0.5, 0.5]`` (smallest -0.5, largest 0.5); tied values
    get their average rank, so all-equal input gives all zeros."""
    v = torch.tensor(list(x), dtype=torch.float64)
    n = v.numel()
    if n < 2:
        return torch.zeros(n, dtype=torch.float64)
    order = torch.argsort(v, stable=True)
    ranks = torch.empty(n, dtype=torch.float64)
    ranks[order] = torch.arange(n, dtype=torch.float64)
    for val in torch.unique(v):  # average the ranks of ties
        sel = v == val
        if int(sel.sum()) > 1:
            ranks[sel] = ranks[sel].mean()
    return ranks / (n - 1) - 0.5


class ES:
    """Antithetic OpenAI-ES over ``model``'s trainable (adapter) parameters; see the module
    doc. ``seed`` seeds the direction generator."""

    name = "es"

    def __init__(self, model: Any, settings: ESSettings, seed: int = 0) -> None:
        self.model = model
        self.s = settings
        self.params = [p for p in model.parameters() if p.requires_grad]
        if not self.params:
            raise ValueError("the model has no trainable parameters (expected a LoRA adapter)")
        self.gen = torch.Generator(device="cpu")
        self.gen.manual_seed(int(seed) & 0x7FFF_FFFF_FFFF_FFFF)
        self.steps = 0

    def _directions(self) -> list[list[torch.Tensor]]:
        return [[torch.randn(p.shape, generator=self.gen, dtype=torch.float32).to(
            device=p.device, dtype=p.dtype) for p in self.params]
            for _ in range(self.s.population)]

    @torch.no_grad()
    def _shift(self, eps: list[torch.Tensor], scale: float) -> None:
        for p, e in zip(self.params, eps, strict=True):
            p.add_(e, alpha=scale)

    def step(self, ctx: StepContext) -> StepResult:
        return self.evaluate_and_update(
            lambda: ctx.rollout(ctx.cards, self.s.episodes, ctx.seed))

    def evaluate_and_update(self, run: Any) -> StepResult:
        """One ES step where ``run()`` plays the step's episodes with the model as it is
        now and returns groups of scored trajectories (a seam for tests)."""
        dirs = self._directions()
        theta = [p.detach().clone() for p in self.params]
        fit_pos: list[float] = []
        fit_neg: list[float] = []
        trajs: list[Trajectory] = []
        was_training = self.model.training
        self.model.eval()
        try:
            for eps in dirs:
                for sign, out in ((1.0, fit_pos), (-1.0, fit_neg)):
                    self._shift(eps, sign * self.s.sigma)
                    try:
                        groups = run()
                    finally:
                        self._restore(theta)
                    flat = [t for g in groups for t in g]
                    good = [t for t in flat if t.outcome != "infra_error"]
                    out.append(sum(t.reward for t in good) / len(good) if good else 0.0)
                    trajs += flat
        finally:
            self._restore(theta)
            self.model.train(was_training)
        ranks = centered_ranks(fit_pos + fit_neg)
        n = self.s.population
        coef = (ranks[:n] - ranks[n:]).tolist()
        scale = self.s.lr / (2 * n * self.s.sigma)
        upd_sq = 0.0
        with torch.no_grad():
            for j, p in enumerate(self.params):
                g = torch.zeros_like(p)
                for c, eps in zip(coef, dirs, strict=True):
                    if c:
                        g.add_(eps[j], alpha=c)
                if self.s.weight_decay:
                    p.mul_(1.0 - self.s.lr * self.s.weight_decay)
                p.add_(g, alpha=scale)
                upd_sq += float((g * scale).pow(2).sum())
        self.steps += 1
        fits = fit_pos + fit_neg
        good = [t for t in trajs if t.outcome != "infra_error"]
        metrics = {
            "reward_mean": sum(fits) / len(fits),
            "reward_best": max(fits), "reward_worst": min(fits),
            "pass_rate": sum(t.passed for t in good) / len(good) if good else 0.0,
            "infra_errors": float(len(trajs) - len(good)),
            "es_pairs_differing": float(sum(1 for c in coef if c)),
            "update_norm": upd_sq ** 0.5,
            "updated": float(any(coef)),
            "samples": float(len(trajs)),
        }
        return StepResult(trajs, metrics, trained_tokens=0, forward_tokens=0)

    @torch.no_grad()
    def _restore(self, theta: list[torch.Tensor]) -> None:
        for p, t in zip(self.params, theta, strict=True):
            p.copy_(t)

    def state_dict(self) -> dict[str, Any]:
        return {"generator": self.gen.get_state(), "steps": self.steps,
                "settings": {f.name: getattr(self.s, f.name) for f in fields(self.s)}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.gen.set_state(state["generator"])
        self.steps = int(state.get("steps", 0))


def _factory(model: Any, settings: Any = None, pad_id: int = 0, config: Any = None,
             **_: Any) -> ES:
    es = getattr(config, "es", None) or {}
    seed = int(getattr(config, "seed", 0))
    return ES(model, ESSettings.from_dict(es), seed=seed * 7_919 + 1)


register_optimizer("es", _factory)

__all__ = ["ES", "ESSettings", "centered_ranks"]
