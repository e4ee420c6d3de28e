"""``ceiling study CONFIG``: train at a ladder of budgets, evaluate every rung, fit, report.

Work units, in order (each leaves a file; a killed study continues where it stopped):

1. ``evals/base.json``: the frozen base on the held-out cards (``k`` samples each);
2. for each seed, for each optimizer: ``runs/<opt>-s<seed>/`` — one training run of
   ``top rung / rollouts per step`` steps (``ceiling.train.Trainer``, resumed from its last
   checkpoint), with a checkpoint at every rung kept; then ``evals/<opt>-s<seed>-r<R>.json``
   for each rung ``R``: the rung's adapter on the held-out cards. Evaluation episodes
   stream to ``evals/*.jsonl`` first, and ``run_episodes`` resumes a cut file;
3. ``study.json`` (figures, fits, the pass@k answer) and ``report.html``, rewritten after
   every unit, so a partial study already has a report that says which rungs are missing.

Every run starts from the same frozen base and trains on the same stage; held-out cards are
the stage's (template, difficulty) arms at seeds from ``eval.seed_base`` (training draws
far below), the same cards and sampling seeds for every checkpoint (paired comparisons).
A study folder remembers its config's digest: resuming with a different config is refused.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .._errors import ConfigError
from ._config import StudyConfig, rollouts_per_step

EVAL_SAMPLING_SEED = 77


def _atomic_json(path: Path, obj: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(obj, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)


def heldout_cards(cfg: StudyConfig) -> list[Any]:
    """The stage's arms (train variant) at held-out seeds, ``per_template`` each."""
    from ..envs import make
    from ..train import config_from_dict, stage_arms

    td = cfg.train_dict(next(iter(cfg.optimizers)), cfg.seeds[0])
    td["stages"] = [{**td["stages"][0], "steps": 1}]
    stage = config_from_dict(td, where="study").stages[0]
    if stage.cards:
        raise ConfigError("a study's stage cannot be a card folder (`cards:`): its held-out "
                          "cards are the stage's templates at unseen seeds",
                          where="train.stages[0].cards",
                          fix="name templates, a family, tags or a mix; evaluate a card "
                              "folder with ceiling eval --suite FOLDER")
    arms = sorted({(a.template, a.difficulty, a.variant) for a in stage_arms(stage)})
    return [make(t, seed=cfg.eval.seed_base + i, difficulty=d, variant=v)
            for t, d, v in arms for i in range(cfg.eval.per_template)]


class Study:
    """Runs a :class:`StudyConfig` into ``out``; :meth:`run` is resumable."""

    def __init__(self, cfg: StudyConfig, out: Path, *, say: Callable[[str], None] = print,
                 max_units: int | None = None) -> None:
        self.cfg = cfg
        self.out = Path(out)
        self.say = say
        self.max_units = max_units  # test hook: stop (KeyboardInterrupt) after N new units
        self.done_units = 0
        self.cache: Any = None
        self.backend = cfg.backend

    # -- bookkeeping ----------------------------------------------------------------------
    def _check_folder(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / "evals").mkdir(exist_ok=True)
        (self.out / "runs").mkdir(exist_ok=True)
        meta = self.out / "config.json"
        digest = self.cfg.digest()
        if meta.is_file():
            old = json.loads(meta.read_text())
            if old.get("digest") != digest:
                raise ConfigError(f"{self.out} holds a study with another config "
                                  f"(digest {old.get('digest')} != {digest})",
                                  where=str(self.out),
                                  fix="use the same config to continue it, or another --out")
        else:
            _atomic_json(meta, {"digest": digest, "config": self.cfg.model_dump(mode="json")})

    def _unit_done(self) -> None:
        self.done_units += 1
        if self.max_units is not None and self.done_units >= self.max_units:
            raise KeyboardInterrupt

    def train_config(self, opt: str, seed: int) -> Any:
        from ..train import config_from_dict

        td = self.cfg.train_dict(opt, seed)
        probe = dict(td, stages=[{**td["stages"][0], "steps": 1}])
        per = rollouts_per_step(config_from_dict(probe, where="study"))
        steps = [r // per for r in self.cfg.ladder]
        every = math.gcd(*steps)
        td["stages"] = [{**td["stages"][0], "steps": steps[-1]}]
        td["checkpoint_every"] = every
        td["keep_checkpoints"] = steps[-1] // every + 1
        td["backend"] = self.backend
        return config_from_dict(td, where=f"study ({opt}, seed {seed})"), per

    # -- evaluation -----------------------------------------------------------------------
    def _evaluate(self, label: str, adapter: Path | None, tcfg: Any,
                  extra: dict[str, Any]) -> dict[str, Any]:
        f = self.out / "evals" / f"{label}.json"
        if f.is_file():
            return dict(json.loads(f.read_text()))
        from ..harness import HarnessConfig
        from ..policies import HFPolicy, SamplingParams
        from ..rollout import run_episodes
        from ..train import VerdictCache, base_path, cached_env_factory
        from ._analysis import card_counts

        if self.cache is None:
            self.cache = VerdictCache()
        t0 = time.perf_counter()
        cards = heldout_cards(self.cfg)
        base_dir = base_path(self.cfg.base)
        pol = HFPolicy(base_dir, adapter=adapter,
                       spec=f"hf:{base_dir}" + (f"+{adapter}" if adapter else ""))
        harness = HarnessConfig(format=tcfg.harness_format,
                                max_reply_tokens=tcfg.sampling.max_new_tokens,
                                history_turns=tcfg.history_turns)
        sp = SamplingParams(temperature=self.cfg.eval.temperature,
                            max_new_tokens=tcfg.sampling.max_new_tokens,
                            stop=harness.stop_strings, seed=EVAL_SAMPLING_SEED)
        trajs = run_episodes(cards, pol, harness, k=self.cfg.eval.k, sampling=sp,
                             backend=self.backend, workers=self.cfg.workers,
                             seed=EVAL_SAMPLING_SEED, out=self.out / "evals" / f"{label}.jsonl",
                             env_factory=cached_env_factory(self.cache))
        rec = {"label": label, **extra, "cards": card_counts(trajs),
               "episodes": len(trajs), "eval_s": round(time.perf_counter() - t0, 1)}
        _atomic_json(f, rec)
        self.say(f"  evaluated {label}: {len(trajs)} episodes in {rec['eval_s']} s")
        self._unit_done()
        return rec

    # -- one run --------------------------------------------------------------------------
    def _train(self, opt: str, seed: int) -> tuple[Path, Any, int]:
        from ..train import Trainer

        tcfg, per = self.train_config(opt, seed)
        run_dir = self.out / "runs" / f"{opt}-s{seed}"
        done = run_dir / "done.json"
        if not done.is_file():
            self.say(f"  training {opt} seed {seed}: {tcfg.total_steps} steps x {per} "
                     "rollouts")
            t0 = time.perf_counter()

            def on_step(info: Any) -> None:
                m = info.metrics
                self.say(f"    {opt} s{seed} step {info.step}/{info.total} rollouts "
                         f"{info.unit['rollouts']} pass {m.get('pass_rate', 0):.2f} "
                         f"({m.get('step_s', 0):.0f} s)")

            summary = Trainer(tcfg, run_dir, on_step=on_step).run(resume=True)
            _atomic_json(done, {"steps": summary.steps, "unit": summary.unit,
                                "notes": summary.notes,
                                "train_s": round(time.perf_counter() - t0, 1)})
            self._unit_done()
        return run_dir, tcfg, per

    def run(self) -> dict[str, Any]:
        from ..train import pick_backend

        self._check_folder()
        self.backend, note = pick_backend(self.cfg.backend)
        if note:
            self.say(f"warning: {note}")
        t0 = time.perf_counter()
        first = next(iter(self.cfg.optimizers))
        tcfg0, _ = self.train_config(first, self.cfg.seeds[0])
        ncards = len(heldout_cards(self.cfg))
        self.say(f"study: {len(self.cfg.optimizers)} optimizers x {len(self.cfg.seeds)} seeds "
                 f"x rungs {self.cfg.ladder} rollouts; {ncards} held-out cards x "
                 f"{self.cfg.eval.k} samples per checkpoint ({self.backend} sandbox)")
        self._evaluate("base", None, tcfg0, {"optimizer": "base", "seed": None, "rollouts": 0,
                                             "unit": None})
        self.write()
        for seed in self.cfg.seeds:
            for opt in self.cfg.optimizers:
                run_dir, tcfg, per = self._train(opt, seed)
                for r in self.cfg.ladder:
                    ck = run_dir / "checkpoints" / f"step-{r // per:06d}"
                    label = f"{opt}-s{seed}-r{r}"
                    if not (self.out / "evals" / f"{label}.json").is_file() and \
                            not ck.is_dir():
                        raise ConfigError(f"checkpoint {ck} is missing", where=str(run_dir),
                                          fix="delete the run folder (and its done.json) to "
                                              "retrain it")
                    unit = json.loads((ck / "meta.json").read_text())["unit"] \
                        if ck.is_dir() else None
                    self._evaluate(label, ck / "adapter", tcfg,
                                   {"optimizer": opt, "seed": seed, "rollouts": r,
                                    "unit": unit})
                self.write()
        result = self.write()
        self.say(f"study done in {time.perf_counter() - t0:.0f} s (this session); report: "
                 f"{self.out / 'report.html'}")
        return result

    def write(self) -> dict[str, Any]:
        """(Re)compute figures from every finished evaluation; write study.json and
        report.html. Safe to call on a partial study."""
        from ._report import analyse, render

        evals = [json.loads(p.read_text()) for p in sorted((self.out / "evals").glob("*.json"))]
        result = analyse(self.cfg, evals)
        _atomic_json(self.out / "study.json", result)
        html, svgs = render(result)
        from ..evaluate import write_report

        write_report(html, self.out / "report.html")
        for name, svg in svgs.items():
            (self.out / f"{name}.svg").write_text(svg)
        return result


def run_study(cfg: StudyConfig, out: Path, *, say: Callable[[str], None] = print,
              ) -> dict[str, Any]:
    return Study(cfg, out, say=say).run()


__all__ = ["Study", "heldout_cards", "run_study"]
