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
4. the search direction ``g = sum_i (rank(F+_i) - rank(F-_i)) * eps_i`` (the OpenAI-ES
   gradient estimate up to a positive factor) is **normalised** and the adapter moves by

       delta = step * sigma * sqrt(D) * g / ||g||      (D: number of adapter weights)

   i.e. ``step`` times the length of one perturbation ``||sigma * eps|| ~ sigma * sqrt(D)``
   (a trust region: with ``step <= 1`` an update never leaves the ball the step's
   perturbations were played in), then the step is capped at ``max_update_ratio * ||theta||``
   (the adapter's current norm) when that knob is above 0; optional weight decay
   ``theta *= 1 - step * weight_decay`` first.

Why not the paper's ``theta += lr / (2 * population * sigma) * sum_i c_i * eps_i``: its
length grows with ``sqrt(D) / sigma``; on the tiny base's LoRA adapter (D = 157,696,
||theta|| = 12.2) ``lr = 0.02, sigma = 0.02`` gave ||delta|| ~ 50, about 0.1 per weight, and
the policy stopped submitting (pass 0.59 -> 0.0 after one step). Here one step is bounded
by construction, whatever ``D``, ``population`` and ``sigma`` are.

Departures from the paper: no virtual batch norm, no noise table (directions come from the
generator; LoRA adapters are small), fitness is a batch mean over cards rather than one
episode. No gradients are computed: ``trained_tokens`` is 0 and the cost is all sampling.
Every episode of every perturbed policy is returned (the trainer's band sampler and unit
count them); ``reward_mean`` is the mean over perturbations, not the centre's reward.

Knobs come from the training config's ``es:`` mapping (unknown keys are errors naming the
nearest valid one): ``population`` (pairs, default 4), ``sigma`` (0.02), ``step`` (0.5,
in perturbation lengths), ``max_update_ratio`` (0.1 of the adapter norm; 0 turns the cap
off), ``episodes`` (samples per card per perturbation, 2), ``weight_decay`` (0.0). The old
``lr`` key is refused with a message naming ``step`` (its meaning changed).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

import torch

from .._errors import ConfigError, nearest
from ..rollout import Trajectory
from ..verify import Outcome
from ._optim import StepContext, StepResult, register_optimizer


@dataclass(frozen=True)
class ESSettings:
    population: int = 4  # antithetic pairs per step (2x this many perturbed policies)
    sigma: float = 0.02
    step: float = 0.5  # update length in perturbation lengths (sigma * sqrt(D))
    max_update_ratio: float = 0.1  # cap: ||delta|| <= this * ||theta|| (0: no cap)
    episodes: int = 2  # samples per card for each perturbed policy
    weight_decay: float = 0.0

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None, where: str = "es") -> ESSettings:
        """Validate the config's ``es:`` mapping (names the bad key and the nearest one)."""
        d = dict(d or {})
        names = [f.name for f in fields(cls)]
        if "lr" in d:
            raise ConfigError(f"'{where}.lr' is no longer an ES knob", where=where,
                              fix="use 'step' (update length in perturbation lengths, "
                                  "e.g. 0.5) and 'max_update_ratio' (see docs/training.md)")
        for k in d:
            if k not in names:
                hint = nearest(str(k), names)
                raise ConfigError(f"unknown key '{where}.{k}'", where=where,
                                  fix=f"did you mean {hint!r}?" if hint else
                                  f"use some of {names}")
        try:
            s = cls(population=int(d.get("population", cls.population)),
                    sigma=float(d.get("sigma", cls.sigma)),
                    step=float(d.get("step", cls.step)),
                    max_update_ratio=float(d.get("max_update_ratio", cls.max_update_ratio)),
                    episodes=int(d.get("episodes", cls.episodes)),
                    weight_decay=float(d.get("weight_decay", cls.weight_decay)))
        except (TypeError, ValueError) as e:
            raise ConfigError(f"{where}: {e}", where=where,
                              fix="population and episodes are integers; sigma, step, "
                                  "max_update_ratio and weight_decay numbers") from None
        for name, ok in (("population", s.population >= 1), ("episodes", s.episodes >= 1),
                         ("sigma", s.sigma > 0), ("step", s.step > 0),
                         ("max_update_ratio", s.max_update_ratio >= 0),
                         ("weight_decay", s.weight_decay >= 0)):
            if not ok:
                raise ConfigError(f"{where}.{name} = {getattr(s, name)!r} is out of range",
                                  where=where, fix="population, episodes >= 1; sigma, step > 0; "
                                                   "max_update_ratio, weight_decay >= 0")
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
                    good = [t for t in flat if t.outcome != Outcome.INFRA_ERROR]
                    out.append(sum(t.reward for t in good) / len(good) if good else 0.0)
                    trajs += flat
        finally:
            self._restore(theta)
            self.model.train(was_training)
        ranks = centered_ranks(fit_pos + fit_neg)
        n = self.s.population
        coef = (ranks[:n] - ranks[n:]).tolist()
        upd_norm, ratio = self._update(coef, dirs)
        self.steps += 1
        fits = fit_pos + fit_neg
        good = [t for t in trajs if t.outcome != Outcome.INFRA_ERROR]
        metrics = {
            "reward_mean": sum(fits) / len(fits),
            "reward_best": max(fits), "reward_worst": min(fits),
            "pass_rate": sum(t.passed for t in good) / len(good) if good else 0.0,
            "infra_errors": float(len(trajs) - len(good)),
            "es_pairs_differing": float(sum(1 for c in coef if c)),
            "update_norm": upd_norm,
            "update_ratio": ratio,  # ||delta|| / ||theta|| before the step
            "updated": float(any(coef)),
            "samples": float(len(trajs)),
        }
        return StepResult(trajs, metrics, trained_tokens=0, forward_tokens=0)

    @torch.no_grad()
    def _update(self, coef: list[float], dirs: list[list[torch.Tensor]]) -> tuple[float, float]:
        """Move the adapter along the normalised direction ``sum_i coef_i * eps_i`` by
        ``step * sigma * sqrt(D)``, capped at ``max_update_ratio * ||theta||``; returns
        (||delta||, ||delta|| / ||theta||). No differing pair: no move (0, 0)."""
        if not any(coef):
            return 0.0, 0.0
        g = []
        for j, p in enumerate(self.params):
            gj = torch.zeros_like(p, dtype=torch.float32)
            for c, eps in zip(coef, dirs, strict=True):
                if c:
                    gj.add_(eps[j].float(), alpha=c)
            g.append(gj)
        g_norm = sum(float(x.pow(2).sum()) for x in g) ** 0.5
        theta_norm = sum(float(p.float().pow(2).sum()) for p in self.params) ** 0.5
        if g_norm == 0.0:
            return 0.0, 0.0
        dim = sum(p.numel() for p in self.params)
        length = self.s.step * self.s.sigma * dim ** 0.5
        if self.s.max_update_ratio > 0 and theta_norm > 0:
            length = min(length, self.s.max_update_ratio * theta_norm)
        for p, gj in zip(self.params, g, strict=True):
            if self.s.weight_decay:
                p.mul_(1.0 - self.s.step * self.s.weight_decay)
            p.add_(gj.to(p.dtype), alpha=length / g_norm)
        return length, (length / theta_norm if theta_norm else float("inf"))

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
