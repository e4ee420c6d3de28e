"""``ceiling demo``: evaluate a frozen base, post-train it with GRPO, evaluate again.

1. Load the base (``builtin:tiny`` by default) through transformers, as ``hf:PATH``.
2. Held-out demo suite: the ``terminal_ops`` templates tagged ``demo`` at seeds from
   :data:`~ceiling.train._sampler.EVAL_SEED_BASE` (training draws seeds far below), ``k``
   samples per card at T=1; plus cards of the held-out structural variant (names never seen
   in training), reported separately.
3. GRPO on a LoRA adapter in real sandboxed episodes scored by the verifier
   (:class:`~ceiling.train.Trainer`), within a time budget.
4. The same suite with the trained adapter loaded from its checkpoint
   (``hf:BASE+ADAPTER``: the path a user takes).
5. ``report.html`` (learning curve, pass@k before/after, per-template change, the 95 %
   paired bootstrap CI of the pass@1 change) and ``demo.json``.

``suite="multistep"`` (``ceiling demo --suite multistep``) runs the same five steps on
the templates tagged ``multistep`` (2-4 demo commands chained in one task) with the base
pre-trained on matching chained episodes (``builtin:tiny-multistep``) and defaults sized
for its longer episodes (:data:`SUITES`).

The namespace sandbox is used when it works here, else the local backend (said loudly).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..cards import TaskCard
from ..rollout import Trajectory
from ._demo_report import paired_diff, pass_curve, per_card, per_template, rates, render
from ._sampler import EVAL_SEED_BASE

# suite -> (template tag, default base, DemoConfig defaults that differ for it)
SUITES: dict[str, tuple[str, str, dict[str, Any]]] = {
    "demo": ("demo", "tiny", {}),
    "multistep": ("multistep", "tiny-multistep",
                  {"per_template": 16, "heldout_per_template": 4, "minutes": 6.0}),
}


@dataclass
class DemoConfig:
    base: str = "tiny"
    suite: str = "demo"  # demo (one command) | multistep (2-4 chained commands)
    out: Path = Path("ceiling-demo")
    minutes: float = 3.0  # training time budget (evaluation comes on top)
    per_template: int = 6  # held-out-seed cards of the train variant, per template
    heldout_per_template: int = 2  # cards of the held-out structural variant, per template
    k: int = 8
    steps: int = 400  # a cap; the time budget usually ends training first
    group_size: int = 8
    cards_per_step: int = 4
    lr: float = 1e-3  # 2e-3 drifted to KL 0.41 in a 31-step run without gain
    beta: float = 0.04
    seed: int = 0
    backend: str = "namespace"
    harness: str | None = None  # bash | json | line; None: bash for smollm2, line for tiny
    temperature: float = 1.0  # evaluations (0: greedy) and training (> 0 only; else 1.0)
    top_p: float = 1.0  # evaluations only (GRPO trains at 1.0)
    max_new_tokens: int = 32
    history_turns: int = 6
    workers: int = 4

    @classmethod
    def for_base(cls, base: str, **kw: Any) -> DemoConfig:
        """Defaults sized for the base: SmolLM2 is ~150x slower per token than tiny, and
        samples at temperature 0.3 (its model card generates at 0.2; at 1.0 it solved 0 of
        14 demo cards in 5 turns, at 0.3 4 of 14: docs/harness.md)."""
        if base.removeprefix("builtin:") == "smollm2":
            small = {"per_template": 1, "heldout_per_template": 1, "k": 2, "steps": 2,
                     "group_size": 2, "cards_per_step": 2, "lr": 1e-4, "max_new_tokens": 96,
                     "minutes": 3.0, "temperature": 0.3}
            small.update(kw)
            return cls(base=base, **small)  # type: ignore[arg-type]
        return cls(base=base, **kw)

    @classmethod
    def for_suite(cls, suite: str, base: str | None = None, **kw: Any) -> DemoConfig:
        """Defaults for a suite (:data:`SUITES`) and its base (default: the suite's own);
        keyword arguments win."""
        if suite not in SUITES:
            from .._errors import ConfigError

            raise ConfigError(f"unknown demo suite {suite!r}", where="--suite",
                              fix=f"use one of {sorted(SUITES)}")
        _, default_base, defaults = SUITES[suite]
        return cls.for_base(base or default_base, **{**defaults, "suite": suite, **kw})


def demo_suite(per_template: int, heldout_per_template: int,
               suite: str = "demo") -> tuple[list[TaskCard], list[TaskCard]]:
    """(cards of the train variant at held-out seeds, cards of the held-out variant) of
    every ``terminal_ops`` template tagged with the suite's tag."""
    from ..envs import make, templates

    tag = SUITES[suite][0] if suite in SUITES else suite
    demo = [t for t in templates("terminal_ops") if tag in t.tags]
    if not demo:
        from .._errors import ConfigError

        raise ConfigError(f"no templates tagged {tag!r} are registered",
                          fix="reinstall ceiling (terminal_ops ships the demo templates)")
    train_v = [make(t.template_id(), seed=EVAL_SEED_BASE + i, variant="train")
               for t in demo for i in range(per_template)]
    held = [make(t.template_id(), seed=EVAL_SEED_BASE + 500_000 + i, variant="heldout")
            for t in demo for i in range(heldout_per_template)]
    return train_v, held


def _harness_format(base: str, chosen: str | None = None) -> str:
    """``chosen`` when given; else the chat default (bash) for smollm2, line for the tiny
    completion bases."""
    if chosen is not None:
        from ..harness import FORMATS

        if chosen not in FORMATS:
            from .._errors import ConfigError

            raise ConfigError(f"unknown harness format {chosen!r}", where="--harness",
                              fix="use " + " | ".join(FORMATS))
        return chosen
    from ..harness import CHAT_DEFAULT_FORMAT

    return CHAT_DEFAULT_FORMAT if base.removeprefix("builtin:") == "smollm2" else "line"


def evaluate(policy: Any, cards: list[TaskCard], cfg: DemoConfig, backend: str, out: Path,
             cache: Any) -> list[Trajectory]:
    from ..harness import HarnessConfig
    from ..policies import sampling_params
    from ..rollout import run_episodes
    from ._verdict_cache import cached_env_factory

    fmt = _harness_format(cfg.base, cfg.harness)
    harness = HarnessConfig(format=fmt, max_reply_tokens=cfg.max_new_tokens,  # type: ignore
                            history_turns=cfg.history_turns)
    sp = sampling_params(temperature=cfg.temperature, top_p=cfg.top_p,
                         max_new_tokens=cfg.max_new_tokens, stop=harness.stop_strings,
                         seed=cfg.seed)
    return run_episodes(cards, policy, harness, k=cfg.k, sampling=sp, backend=backend,
                        workers=cfg.workers, seed=cfg.seed + 77, out=out,
                        env_factory=cached_env_factory(cache))


def run_demo(cfg: DemoConfig, *, say: Callable[[str], None] = print,
             on_step: Callable[[Any], None] | None = None) -> dict[str, Any]:
    """Run the whole demo; returns the ``demo.json`` dict (also written to ``cfg.out``)."""
    from ..basemodel import weights_sha256
    from ..policies import HFPolicy
    from ._config import config_from_dict
    from ._model import base_path
    from ._rollouts import pick_backend
    from ._trainer import Trainer
    from ._verdict_cache import VerdictCache

    t_all = time.perf_counter()
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    import shutil

    for old in ("before.jsonl", "after.jsonl"):  # a demo always starts afresh
        (out / old).unlink(missing_ok=True)
    shutil.rmtree(out / "run", ignore_errors=True)
    backend, note = pick_backend(cfg.backend)
    notes = [note] if note else []
    if note:
        say(f"warning: {note}")
    base_dir = base_path(cfg.base)
    sha = weights_sha256(base_dir)
    suite, held = demo_suite(cfg.per_template, cfg.heldout_per_template, cfg.suite)
    cache = VerdictCache()
    say(f"[1/3] evaluating the base on {len(suite)} + {len(held)} held-out cards x {cfg.k} "
        f"samples ({backend} sandbox)")
    t0 = time.perf_counter()
    base_pol = HFPolicy(base_dir, spec=f"hf:{base_dir}")
    before = evaluate(base_pol, suite + held, cfg, backend, out / "before.jsonl", cache)
    del base_pol
    t_eval0 = time.perf_counter() - t0

    say(f"[2/3] GRPO on a LoRA adapter for up to {cfg.minutes:g} min")
    fmt = _harness_format(cfg.base, cfg.harness)
    tcfg = config_from_dict({
        "base": str(base_dir), "seed": cfg.seed, "lr": cfg.lr, "group_size": cfg.group_size,
        "cards_per_step": cfg.cards_per_step, "loss": {"beta": cfg.beta},
        "sampling": {"temperature": cfg.temperature if cfg.temperature > 0 else 1.0,
                     "max_new_tokens": cfg.max_new_tokens},
        "harness_format": fmt, "backend": backend, "workers": cfg.workers,
        "history_turns": cfg.history_turns,
        "checkpoint_every": 25,
        "stages": [{"name": cfg.suite, "family": "terminal_ops",
                    "tags": [SUITES[cfg.suite][0]],
                    "variants": ["train"], "steps": cfg.steps}],
    }, where="demo")
    run_dir = out / "run"
    summary = Trainer(tcfg, run_dir, on_step=on_step, time_budget_s=cfg.minutes * 60).run()
    notes += summary.notes
    ckpt = Path(summary.checkpoint or "")

    say(f"[3/3] evaluating the trained adapter ({ckpt.name})")
    t0 = time.perf_counter()
    trained = HFPolicy(base_dir, adapter=ckpt / "adapter", spec=f"hf:{base_dir}+{ckpt}/adapter")
    after = evaluate(trained, suite + held, cfg, backend, out / "after.jsonl", cache)
    t_eval1 = time.perf_counter() - t0
    if weights_sha256(base_dir) != sha:
        notes.append("the base weights CHANGED during the demo: this must never happen")

    ids_suite = {c.id for c in suite}
    bc, ac = per_card(before), per_card(after)
    b_main = {i: d for i, d in bc.items() if i in ids_suite}
    a_main = {i: d for i, d in ac.items() if i in ids_suite}
    b_held = {i: d for i, d in bc.items() if i not in ids_suite}
    a_held = {i: d for i, d in ac.items() if i not in ids_suite}
    result: dict[str, Any] = {
        "base": cfg.base, "base_path": str(base_dir), "base_sha256": sha, "backend": backend,
        "harness": fmt, "sampling": {"temperature": cfg.temperature, "top_p": cfg.top_p,
                                     "max_new_tokens": cfg.max_new_tokens},
        "suite": {"name": cfg.suite, "cards": len(suite), "heldout_cards": len(held),
                  "k": cfg.k,
                  "seeds_from": EVAL_SEED_BASE},
        "before": rates(b_main, cfg.k), "after": rates(a_main, cfg.k),
        "diff": paired_diff(b_main, a_main, seed=cfg.seed),
        "pass_curve": {"before": pass_curve(b_main, cfg.k), "after": pass_curve(a_main, cfg.k)},
        "heldout_variant": {"before": rates(b_held, cfg.k), "after": rates(a_held, cfg.k),
                            "diff": paired_diff(b_held, a_held, seed=cfg.seed)},
        "per_template": per_template(b_main, a_main, cfg.k),
        "training": {"steps": summary.steps, "checkpoint": str(ckpt), "unit": summary.unit,
                     "last_metrics": summary.last_metrics},
        "verdict_cache": cache.stats(),
        "timings_s": {"eval_before": round(t_eval0, 1), "train": round(summary.unit["wall_s"], 1),
                      "eval_after": round(t_eval1, 1),
                      "total": round(time.perf_counter() - t_all, 1)},
        "notes": notes,
    }
    html = render(result, before, after, run_dir / "metrics.jsonl")
    from ..evaluate import write_report

    report = write_report(html, out / "report.html")
    result["report"] = str(report)
    (out / "demo.json").write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    return result
