"""The task mix: draw task cards by weights over task type and horizon.

``task_mix.yaml``::

    task_mix: {terminal_ops: 0.2, repo_refactor: 0.3, multi_tool: 0.3, security_audit: 0.2}
    horizon: {short: 0.3, medium: 0.4, long: 0.3}
    variants: {train: 1.0}             # optional; default train only
    difficulty: {min: 1, max: 3}       # optional; keep template difficulties in the range
    templates: {include: ["*"], exclude: ["terminal_ops/demo-*"]}   # optional globs on ids
    scheme: raking                     # optional; raking (default) or independent

**Sampling scheme.** The weights by type (``p_t``) and by horizon (``q_h``) are *marginals*.
Only some (type, horizon) cells are reachable: a cell is reachable when a registered template
of that type has a difficulty whose horizon (``Template.horizons``) is that horizon. The
joint distribution over reachable cells is:

- ``raking`` (default): iterative proportional fitting (Deming-Stephan) started from
  ``p_t * q_h`` on the reachable cells. When some joint on those cells has both marginals,
  raking converges to the one closest to independence (minimum KL divergence), and the
  realised marginals match the weights exactly in expectation. When no such joint exists
  (say only types holding half the mass reach ``long`` but ``long`` asks for 0.9), the
  last raking step fits the *type* weights, so the type marginal stays exact and the
  horizon marginal carries the bias.
- ``independent``: ``p_t * q_h`` on the reachable cells, renormalised (independent draws
  with rejection of unreachable combinations). When a type cannot reach a horizon this
  shifts mass: that type loses the horizon's share and the horizon is filled by the other
  types, so both realised marginals are biased.

Either way :meth:`TaskMix.expected_marginals` reports what the joint implies next to the
targets, so a bias is printed, never hidden. Within a cell, the template is uniform over
the type's templates that reach the horizon, the difficulty uniform over that template's
difficulties with that horizon, the variant drawn by ``variants`` weights and the card seed
uniform on ``[0, 2**32)``: all from one ``random.Random(seed)``, so a (mix, seed, n) names
the same cards on every machine with the same registry.

**Checking realised against target** (:func:`distribution_report`): per cell (and per
marginal) the count must lie within 4 binomial standard deviations of ``n * p``
(``|k - n p| <= 4 sqrt(n p (1 - p))``; about 6e-5 two-sided false-alarm rate per cell under
the normal approximation), cells with ``p = 0`` must be empty; a Pearson chi-square over the
reachable cells (``dof = cells - 1``) and its p-value are reported as well.
"""

from __future__ import annotations

import fnmatch
import math
import os
import random
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .._errors import ConfigError, nearest
from .._yaml import first_error, load_yaml
from ..cards import HORIZONS, TASK_TYPES, TaskCard
from ._registry import MAX_SEED, VARIANTS, make, templates

TOL = 1e-6  # how far the weights may sum from 1


class DifficultyRange(BaseModel):
    model_config = ConfigDict(extra="forbid")
    min: int = Field(0, ge=0, le=10)
    max: int = Field(10, ge=0, le=10)


class TemplateFilter(BaseModel):
    model_config = ConfigDict(extra="forbid")
    include: list[str] = Field(default_factory=lambda: ["*"])
    exclude: list[str] = Field(default_factory=list)


class MixSpec(BaseModel):
    """The YAML file, validated. Every error names its field."""

    model_config = ConfigDict(extra="forbid")
    task_mix: dict[str, float]
    horizon: dict[str, float] | None = None
    variants: dict[str, float] = Field(default_factory=lambda: {"train": 1.0})
    difficulty: DifficultyRange = Field(default_factory=lambda: DifficultyRange(min=0, max=10))
    templates: TemplateFilter = Field(default_factory=lambda: TemplateFilter())
    scheme: Literal["raking", "independent"] = "raking"


@dataclass(frozen=True, slots=True)
class Draw:
    """One drawn task: enough to make its card (``make()``) without generating it yet."""

    template_id: str
    type: str
    horizon: str
    difficulty: int
    variant: str
    seed: int

    def make(self) -> TaskCard:
        return make(self.template_id, seed=self.seed, difficulty=self.difficulty,
                    variant=self.variant)


Option = tuple[str, int]  # (template id, difficulty)


class TaskMix:
    """Weights by type and horizon over the registered templates (see the module doc).

    Construction validates everything against the registry, so a mix that cannot be
    sampled fails here with a :class:`ConfigError` naming the field and what is allowed.
    """

    def __init__(self, spec: MixSpec, *, where: str = "task_mix") -> None:
        self.spec, self.where = spec, where
        self._check_weights("task_mix", spec.task_mix, TASK_TYPES, "task type")
        if spec.horizon is not None:
            self._check_weights("horizon", spec.horizon, HORIZONS, "horizon")
        self._check_weights("variants", spec.variants, VARIANTS, "variant")
        d = spec.difficulty
        if d.min > d.max:
            raise ConfigError(f"difficulty.min ({d.min}) is above difficulty.max ({d.max})",
                              where=f"{where}: difficulty", fix="swap them")
        self.options = self._options()
        self._joint = self._solve()

    # -- construction ------------------------------------------------------------------
    @classmethod
    def from_yaml(cls, path: str | os.PathLike[str]) -> TaskMix:
        data = load_yaml(path, missing_fix="pass a task_mix.yaml (see examples/task_mix.yaml)")
        return cls.from_dict(data, where=str(path))

    @classmethod
    def from_dict(cls, data: Any, *, where: str = "task_mix") -> TaskMix:
        if not isinstance(data, dict):
            raise ConfigError("a task mix is a mapping", where=where,
                              fix="start with 'task_mix: {multi_tool: 1.0}'")
        try:
            spec = MixSpec.model_validate(data)
        except ValidationError as e:
            kind, loc, hint, err = first_error(e, MixSpec)
            if kind == "extra_forbidden":
                name = str(err["loc"][-1])
                fix = f"remove '{name}'" + (f" (did you mean '{hint}'?)" if hint else "")
            elif kind == "missing":
                fix = f"add '{loc}' (e.g. task_mix: {{multi_tool: 1.0}})"
            else:
                fix = str(err.get("msg"))
            raise ConfigError(f"field '{loc}' is invalid: {err.get('msg')}", where=where,
                              fix=fix) from None
        return cls(spec, where=where)

    def _check_weights(self, field: str, weights: dict[str, float], allowed: Iterable[str],
                       noun: str) -> None:
        allowed = list(allowed)
        where = f"{self.where}: {field}"
        if not weights:
            raise ConfigError(f"'{field}' is empty", where=where,
                              fix=f"give at least one {noun} a weight; allowed: {allowed}")
        for name, w in weights.items():
            if name not in allowed:
                hint = nearest(str(name), allowed)
                raise ConfigError(f"unknown {noun} {name!r}", where=where,
                                  fix=(f"did you mean {hint!r}? " if hint else "")
                                  + f"allowed: {allowed}")
            if not math.isfinite(w) or w < 0:
                raise ConfigError(f"weight of {name!r} is {w}", where=where,
                                  fix="weights are finite numbers >= 0")
        total = sum(weights.values())
        if abs(total - 1.0) > TOL:
            scaled = {k: round(v / total, 4) for k, v in weights.items()} if total > 0 else {}
            raise ConfigError(f"weights sum to {total:g}, not 1", where=where,
                              fix=f"make them sum to 1, e.g. {scaled}" if scaled
                              else "give at least one weight > 0")

    def _options(self) -> dict[tuple[str, str], list[Option]]:
        """(type, horizon) -> [(template id, difficulty)] for the selected templates."""
        f, d = self.spec.templates, self.spec.difficulty
        out: dict[tuple[str, str], list[Option]] = {}
        for cls in templates():
            tid = cls.template_id()
            if not any(fnmatch.fnmatch(tid, g) for g in f.include) or any(
                    fnmatch.fnmatch(tid, g) for g in f.exclude):
                continue
            for diff in cls.difficulties:
                if d.min <= diff <= d.max:
                    h = horizon_of(tid, diff)
                    out.setdefault((cls.family, h), []).append((tid, diff))
        for t, w in self.spec.task_mix.items():
            if w > 0 and not any(k[0] == t for k in out):
                raise ConfigError(
                    f"no registered template of type {t!r} is selected",
                    where=f"{self.where}: task_mix.{t}",
                    fix="set its weight to 0, or widen templates.include/exclude and "
                        "difficulty (see `ceiling envs list`)")
        return out

    def reachable(self, task_type: str) -> list[str]:
        """The horizons a type reaches with the selected templates and difficulties."""
        return [h for h in HORIZONS if (task_type, h) in self.options]

    def _solve(self) -> dict[tuple[str, str], float]:
        p = {t: w for t, w in self.spec.task_mix.items() if w > 0}
        if self.spec.horizon is None:  # horizons follow the templates: uniform over options
            joint = {}
            for t, w in p.items():
                opts = {h: len(self.options.get((t, h), [])) for h in HORIZONS}
                n = sum(opts.values())
                joint.update({(t, h): w * c / n for h, c in opts.items() if c})
            return joint
        q = {h: w for h, w in self.spec.horizon.items() if w > 0}
        for h in q:
            if not any((t, h) in self.options for t in p):
                reach = {t: self.reachable(t) for t in p}
                raise ConfigError(
                    f"no selected template of the weighted types reaches horizon {h!r}",
                    where=f"{self.where}: horizon.{h}",
                    fix=f"set its weight to 0 or add templates that reach it; reachable "
                        f"horizons by type: {reach}")
        for t in p:
            if not any((t, h) in self.options for h in q):
                raise ConfigError(
                    f"type {t!r} reaches none of the weighted horizons {sorted(q)}",
                    where=f"{self.where}: task_mix.{t}",
                    fix=f"it reaches {self.reachable(t)}; weight one of those horizons")
        cells = [(t, h) for t in p for h in q if (t, h) in self.options]
        joint = {c: p[c[0]] * q[c[1]] for c in cells}
        z = sum(joint.values())
        joint = {c: v / z for c, v in joint.items()}
        if self.spec.scheme == "raking":
            joint = _rake(joint, p, q)
        return joint

    # -- queries -----------------------------------------------------------------------
    def joint(self) -> dict[tuple[str, str], float]:
        """P(type, horizon) over the reachable cells (sums to 1)."""
        return dict(self._joint)

    def expected_marginals(self) -> dict[str, dict[str, float]]:
        """The marginals the joint implies; compare with the targets to see any bias."""
        by_t: dict[str, float] = {}
        by_h: dict[str, float] = {}
        for (t, h), v in self._joint.items():
            by_t[t] = by_t.get(t, 0.0) + v
            by_h[h] = by_h.get(h, 0.0) + v
        return {"type": by_t, "horizon": by_h}

    def draw(self, n: int, *, seed: int = 0) -> list[Draw]:
        """``n`` draws (no cards generated yet). Deterministic in (mix, registry, seed)."""
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ConfigError(f"n = {n!r} is not a positive integer", where="n",
                              fix="ask for at least one card, e.g. --n 100")
        check_seed(seed)
        rng = random.Random(seed)
        cells = sorted(self._joint)
        weights = [self._joint[c] for c in cells]
        vnames = sorted(self.spec.variants)
        vweights = [self.spec.variants[v] for v in vnames]
        out = []
        for _ in range(n):
            t, h = rng.choices(cells, weights)[0]
            opts = self.options[(t, h)]
            tids = sorted({tid for tid, _ in opts})
            tid = rng.choice(tids)
            diff = rng.choice(sorted(d for x, d in opts if x == tid))
            variant = rng.choices(vnames, vweights)[0]
            out.append(Draw(tid, t, h, diff, variant, rng.randrange(MAX_SEED + 1)))
        return out

    def sample(self, n: int, *, seed: int = 0) -> list[TaskCard]:
        """``n`` task cards (``draw`` then ``make`` each)."""
        return [d.make() for d in self.draw(n, seed=seed)]


def check_seed(seed: Any) -> int:
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed <= MAX_SEED:
        raise ConfigError(f"seed {seed!r} is out of range", where="seed",
                          fix=f"use an integer in [0, {MAX_SEED}]")
    return seed


_HORIZON_CACHE: dict[Option, str] = {}


def horizon_of(template_id: str, difficulty: int) -> str:
    """A template's horizon at a difficulty: ``Template.horizons``, or (when the template
    does not declare it) the horizon of a probe card made with seed 0."""
    from ._registry import get_template

    declared = get_template(template_id).horizons.get(difficulty)
    if declared in HORIZONS:
        return declared
    key = (template_id, difficulty)
    if key not in _HORIZON_CACHE:
        _HORIZON_CACHE[key] = make(template_id, seed=0, difficulty=difficulty).horizon
    return _HORIZON_CACHE[key]


def _sums(x: dict[tuple[str, str], float], axis: int) -> dict[str, float]:
    out: dict[str, float] = {}
    for c, v in x.items():
        out[c[axis]] = out.get(c[axis], 0.0) + v
    return out


def _rake(joint: dict[tuple[str, str], float], p: dict[str, float], q: dict[str, float],
          iters: int = 2000, tol: float = 1e-12) -> dict[tuple[str, str], float]:
    """Iterative proportional fitting of ``joint`` to row sums ``p`` and column sums ``q``.
    Returns the last iterate; when the margins are not jointly reachable it does not
    converge, and the caller reports the remaining bias through expected_marginals."""
    x = dict(joint)
    for _ in range(iters):
        for margin, axis in ((q, 1), (p, 0)):  # types last: they hold when both cannot
            sums = _sums(x, axis)
            x = {c: (v * margin[c[axis]] / sums[c[axis]] if sums[c[axis]] > 0 else v)
                 for c, v in x.items()}
        err = 0.0
        for margin, axis in ((p, 0), (q, 1)):
            sums = _sums(x, axis)
            err = max(err, *(abs(sums[k] - margin[k]) for k in margin))
        if err < tol:
            break
    z = sum(x.values())
    return {c: v / z for c, v in x.items()}


# ---------------------------------------------------------------------------------------
# Realised distribution.

def _chi2_sf(x: float, dof: int) -> float:
    """P(X >= x) for X ~ chi-square(dof): the regularised upper incomplete gamma
    Q(dof/2, x/2) (series for small x, Lentz continued fraction otherwise)."""
    if dof <= 0:
        return float("nan")
    a, z = dof / 2.0, x / 2.0
    if z <= 0:
        return 1.0
    lg = math.lgamma(a)
    if z < a + 1:
        term = total = 1.0 / a
        ap = a
        for _ in range(1000):
            ap += 1
            term *= z / ap
            total += term
            if abs(term) < abs(total) * 1e-15:
                break
        return max(0.0, 1.0 - total * math.exp(-z + a * math.log(z) - lg))
    b, c, d = z + 1 - a, 1e300, 1.0 / (z + 1 - a)
    h = d
    for i in range(1, 1000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = 1e-300 if abs(d) < 1e-300 else d
        c = b + an / c
        c = 1e-300 if abs(c) < 1e-300 else c
        d = 1.0 / d
        h *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return min(1.0, math.exp(-z + a * math.log(z) - lg) * h)


def _table(counts: Counter[str], probs: dict[str, float], n: int,
           target: dict[str, float] | None = None) -> dict[str, Any]:
    rows = {}
    ok = hit = True
    for k in sorted(set(counts) | set(probs) | set(target or {})):
        p = probs.get(k, 0.0)
        c = counts.get(k, 0)
        sd = math.sqrt(n * p * (1 - p))
        within = c == 0 if p == 0 else abs(c - n * p) <= 4 * sd
        ok &= within
        row: dict[str, Any] = {"count": c, "share": c / n, "expected": p, "within_4sd": within}
        if target is not None:
            pt = target.get(k, 0.0)
            row["target"] = pt
            row["within_4sd_of_target"] = (c == 0 if pt == 0 else
                                           abs(c - n * pt) <= 4 * math.sqrt(n * pt * (1 - pt)))
            hit &= row["within_4sd_of_target"]
        rows[k] = row
    out: dict[str, Any] = {"rows": rows, "within_sampling_error": ok}
    if target is not None:
        out["matches_target"] = hit
    return out


def distribution_report(mix: TaskMix, observed: Iterable[tuple[str, str, str, str]]
                        ) -> dict[str, Any]:
    """Realised counts and shares by type, horizon, type x horizon, template and variant,
    next to the targets (``target``) and what the joint implies (``expected``), with the
    4-sigma checks and a chi-square test. ``observed`` yields (type, horizon, template id,
    variant) per card."""
    obs = list(observed)
    n = len(obs)
    exp = mix.expected_marginals()
    joint = mix.joint()
    by = {k: Counter(o[i] for o in obs) for i, k in enumerate(("type", "horizon", "template",
                                                                "variant"))}
    cells: Counter[str] = Counter(f"{o[0]}/{o[1]}" for o in obs)
    jp = {f"{t}/{h}": v for (t, h), v in joint.items()}
    chi2 = sum((cells.get(k, 0) - n * v) ** 2 / (n * v) for k, v in jp.items() if v > 0)
    dof = sum(1 for v in jp.values() if v > 0) - 1
    vw = mix.spec.variants
    horizon_target = mix.spec.horizon if mix.spec.horizon is not None else exp["horizon"]
    report: dict[str, Any] = {
        "n": n, "scheme": mix.spec.scheme,
        "type": _table(by["type"], exp["type"], n, dict(mix.spec.task_mix)),
        "horizon": _table(by["horizon"], exp["horizon"], n, dict(horizon_target)),
        "cell": _table(cells, jp, n),
        "variant": _table(by["variant"], dict(vw), n, dict(vw)),
        "template": {k: {"count": c, "share": c / n} for k, c in sorted(by["template"].items())},
        "bias": {
            axis: {k: exp[axis].get(k, 0.0) - w for k, w in target.items()}
            for axis, target in (("type", mix.spec.task_mix), ("horizon", horizon_target))},
        "chi_square": {"statistic": chi2, "dof": dof,
                       "p_value": _chi2_sf(chi2, dof) if dof > 0 else None},
        "unreachable": {t: [h for h in HORIZONS if h not in mix.reachable(t)]
                        for t in mix.spec.task_mix if mix.spec.task_mix[t] > 0},
    }
    report["within_sampling_error"] = all(
        report[k]["within_sampling_error"] for k in ("type", "horizon", "cell", "variant"))
    report["matches_targets"] = all(report[k]["matches_target"] for k in ("type", "horizon"))
    return report


__all__ = ["Draw", "MixSpec", "TaskMix", "check_seed", "distribution_report", "horizon_of"]
