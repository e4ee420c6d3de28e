"""``ceiling bench train``: ceiling's GRPO step next to TRL's ``GRPOTrainer``, same run.

Both trainers get the same base (``builtin:tiny`` when its fixture is present, else a tiny
randomly initialised Llama saved to a temp folder, so both load it with ``from_pretrained``),
a fresh LoRA adapter of the same shape, the same prompts (first turns of the demo cards in
the line protocol), group size, completion budget, learning rate, beta, clipping, and the
same reward function of the reply text. Single-turn: no sandbox, so both can run it.

A step is: sample ``prompts x group_size`` completions (stopping at a newline), score
them, one optimizer update. Seconds per step and generated tokens/s are medians over the
timed steps after ``warmup`` untimed ones; ``ratio`` is TRL's seconds per step over
ceiling's (> 1: ceiling is faster). Each step is timed twice: wall clock and the process's
CPU time (``time.process_time``; ``cpu_s_per_step``). On a shared, oversubscribed machine
wall time mostly measures the wait for a core, so the CPU-time ratio is the one that
repeats; with several torch threads an oversubscribed machine also inflates CPU time
(threads spin at barriers while a sibling waits for a core), so ``threads`` (default:
torch's) sets the intra-op threads of both trainers for the run.

TRL settings that differ from its defaults, to make the comparison like for like (see
research/cpu-feasibility.md §5): ``beta`` 0.04 (default 0), ``loss_type="bnpo"`` (token
aggregation, ceiling's ``token``), ``use_bias_correction_kl=False`` (TRL's default
multiplies the KL term by the ratio), ``gradient_checkpointing=False``, a constant
learning rate, and ``generation_config.eos_token_id`` = EOS plus every newline-carrying
token (otherwise TRL's completion mask counts the padding after the stop).
Known remaining differences: TRL normalises advantages with the unbiased group std,
ceiling with the biased one; TRL samples with ``model.generate``, ceiling with its own
KV-cached loop (which records the log-probs it samples with).

:func:`loss_crosscheck` compares the per-token loss of both implementations on one fixed
batch (fixed old/ref log-probs and advantages chosen so that clipping is active): each
token's loss is read from TRL's own ``_compute_loss`` by masking every other token out.
"""

from __future__ import annotations

import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .._errors import ConfigError


@dataclass(frozen=True)
class TrainBenchSettings:
    steps: int = 4  # timed steps per trainer
    warmup: int = 1
    prompts: int = 4
    group_size: int = 8
    max_new_tokens: int = 24
    lr: float = 1e-3
    beta: float = 0.04
    clip: float = 0.2
    lora_r: int = 16
    seed: int = 0
    base: str = "auto"  # "auto": builtin:tiny if present, else a random tiny Llama
    threads: int | None = None  # torch intra-op threads for both trainers (None: as is)
    rounds: int = 1  # (ceiling, TRL) pairs, the order alternating; the ratio per round


def trl_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("trl") is not None and \
        importlib.util.find_spec("datasets") is not None


# -- shared inputs -----------------------------------------------------------------------

def bench_base(spec: str, workdir: Path) -> tuple[Path, str]:
    """(model folder, label). ``auto`` prefers the built-in tiny base."""
    from .._errors import CeilingError
    from ..basemodel import resolve

    if spec in ("auto", "tiny", "builtin:tiny"):
        try:
            return resolve("tiny"), "builtin:tiny"
        except CeilingError:
            if spec != "auto":
                raise
        return random_tiny_llama(workdir / "random-tiny"), "random tiny Llama (no fixture)"
    from ._model import base_path

    return base_path(spec), spec


def random_tiny_llama(out: Path, seed: int = 0) -> Path:
    """A ~0.1M-parameter randomly initialised Llama with the corpus tokenizer, saved."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from ..basemodel.build import corpus, train_tokenizer

    tok: Any = train_tokenizer(corpus.render(corpus.generate(400, seed)), vocab_size=400)
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=4, intermediate_size=128,
                      max_position_embeddings=512, tie_word_embeddings=True,
                      eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    LlamaForCausalLM(cfg).save_pretrained(out)
    tok.save_pretrained(out)
    return out


def bench_prompts(n: int) -> tuple[list[str], list[list[str]]]:
    """First-turn prompts of ``n`` demo cards and, per prompt, the file names it mentions."""
    import re

    from ..basemodel.build import prompt_of
    from ..envs import make, templates

    demo = sorted(t.template_id() for t in templates("terminal_ops") if "demo" in t.tags)
    if not demo:
        raise ConfigError("no demo templates are registered", fix="reinstall ceiling")
    prompts, names = [], []
    for i in range(n):
        card = make(demo[i % len(demo)], seed=i)
        prompts.append(prompt_of(card.instruction))
        names.append(re.findall(r"[\w.-]+\.\w+", card.instruction))
    return prompts, names


def make_reward(names_by_prompt: dict[str, list[str]]) -> Callable[[str, str], float]:
    """Score of one reply: 0.5 for a well-formed action line (``run:``/``write:``/...),
    +0.5 when it names a file of the task, plus a tiny length term (0.01 x (len % 7)) so a
    group is never all-equal and both trainers do the same work every step."""
    actions = ("run:", "read:", "write:", "edit:", "submit", "give_up:")

    def reward(prompt: str, completion: str) -> float:
        line = completion.split("\n", 1)[0].strip()
        r = 0.5 if line.startswith(actions) else 0.0
        if any(n in line for n in names_by_prompt.get(prompt, [])):
            r += 0.5
        return r + 0.01 * (len(line) % 7)

    return reward


def _load(path: Path, r: int, seed: int) -> tuple[Any, Any]:
    from ._model import attach_lora, load_base

    model, tok = load_base(path)
    return attach_lora(model, r=r, alpha=2 * r, seed=seed), tok


def _newline_ids(tok: Any) -> list[int]:
    return [i for i in range(len(tok)) if "\n" in tok.decode([i])]


# -- the two trainers ----------------------------------------------------------------------

def _ceiling_steps(path: Path, s: TrainBenchSettings, prompts: list[str],
                   reward: Callable[[str, str], float]) -> dict[str, Any]:
    from ..policies import HFPolicy, PolicyRequest, SamplingParams
    from ..rollout import Trajectory, Turn
    from ..verify import Outcome
    from ._grpo import GRPO, GRPOSettings
    from ._loss import LossConfig

    model, tok = _load(path, s.lora_r, s.seed)
    policy = HFPolicy("bench", model=model, tokenizer=tok)
    grpo = GRPO(model, GRPOSettings(
        lr=s.lr, group_size=s.group_size, max_grad_norm=1.0, micro_batch=s.prompts *
        s.group_size, loss=LossConfig(beta=s.beta, clip_low=s.clip, clip_high=s.clip,
                                      aggregation="token")), int(tok.pad_token_id))
    times: list[float] = []
    cpu: list[float] = []
    toks: list[int] = []
    zero_var = 0
    for step in range(s.warmup + s.steps):
        t0 = time.perf_counter()
        c0 = time.process_time()
        reqs = [PolicyRequest(messages=[], prompt=p) for p in prompts for _ in range(s.group_size)]
        gens = policy.generate(reqs, SamplingParams(temperature=1.0,
                                                    max_new_tokens=s.max_new_tokens,
                                                    stop=("\n",), seed=s.seed * 1000 + step))
        groups = []
        for i, p in enumerate(prompts):
            g = []
            for j in range(s.group_size):
                gen = gens[i * s.group_size + j]
                r = reward(p, gen.text)
                g.append(Trajectory(
                    episode_id=f"{i}#{j}", card_id=str(i), card_hash="", template=None,
                    type="bench", horizon="short", difficulty=1, split="train", feasible=True,
                    faults=False, seed=step, sample=j, policy="bench", harness_fingerprint="",
                    sampling={}, reward=r, passed=r >= 1.0, outcome=Outcome.FAILED,
                    turns=[Turn(text=gen.text, token_ids=gen.token_ids, logprobs=gen.logprobs,
                                prompt_token_ids=gen.prompt_token_ids)]))
            groups.append(g)
        res = grpo.update(groups)
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        if step >= s.warmup:
            times.append(dt)
            cpu.append(dc)
            toks.append(sum(len(g.token_ids) for g in gens))
            zero_var += int(res.metrics.get("groups_zero_variance", 0))
    return _summary(times, toks, cpu) | {"groups_zero_variance": zero_var}


def _trl_steps(path: Path, s: TrainBenchSettings, prompts: list[str],
               reward: Callable[[str, str], float], workdir: Path) -> dict[str, Any]:
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from ._model import LORA_TARGETS

    tok = AutoTokenizer.from_pretrained(str(path))
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(str(path))
    model.generation_config.eos_token_id = sorted({int(tok.eos_token_id), *_newline_ids(tok)})
    names = {n.rsplit(".", 1)[-1] for n, _ in model.named_modules()}
    lora = LoraConfig(r=s.lora_r, lora_alpha=2 * s.lora_r, lora_dropout=0.0, bias="none",
                      target_modules=[t for t in LORA_TARGETS if t in names],
                      task_type="CAUSAL_LM")
    args = GRPOConfig(
        output_dir=str(workdir / "trl"), use_cpu=True, bf16=False, report_to="none",
        save_strategy="no", logging_steps=1, max_steps=s.warmup + s.steps, seed=s.seed,
        per_device_train_batch_size=s.prompts * s.group_size, num_generations=s.group_size,
        max_completion_length=s.max_new_tokens, beta=s.beta, loss_type="bnpo",
        epsilon=s.clip, learning_rate=s.lr, lr_scheduler_type="constant",
        adam_beta2=0.99, max_grad_norm=1.0, gradient_checkpointing=False,
        use_bias_correction_kl=False, shuffle_dataset=False, disable_dropout=True,
        temperature=1.0, top_p=1.0, top_k=0, dataloader_num_workers=0)

    def reward_fn(prompts: list[str], completions: list[str], **_: Any) -> list[float | None]:
        return [reward(p, c) for p, c in zip(prompts, completions, strict=True)]

    times: list[float] = []
    cpu: list[float] = []
    t_start = [0.0, 0.0]

    class Timer(TrainerCallback):  # type: ignore[misc]
        def on_step_begin(self, *a: Any, **k: Any) -> None:
            t_start[:] = [time.perf_counter(), time.process_time()]

        def on_step_end(self, *a: Any, **k: Any) -> None:
            times.append(time.perf_counter() - t_start[0])
            cpu.append(time.process_time() - t_start[1])

    trainer = GRPOTrainer(model=model, reward_funcs=reward_fn, args=args,
                          train_dataset=Dataset.from_dict({"prompt": prompts}),
                          processing_class=tok, peft_config=lora, callbacks=[Timer()])
    with contextlib.redirect_stdout(sys.stderr):  # TRL prints its logs to stdout
        trainer.train()
    lens = [h["completions/mean_length"] for h in trainer.state.log_history
            if "completions/mean_length" in h]
    n = s.prompts * s.group_size
    toks = [round(m * n) for m in lens]
    return _summary(times[s.warmup:], toks[s.warmup:], cpu[s.warmup:])


def _summary(times: list[float], toks: list[int], cpu: list[float]) -> dict[str, Any]:
    rates = [t / max(dt, 1e-9) for t, dt in zip(toks, times, strict=False)]
    return {"s_per_step": round(statistics.median(times), 4) if times else None,
            "cpu_s_per_step": round(statistics.median(cpu), 4) if cpu else None,
            "tokens_per_s": round(statistics.median(rates), 1) if rates else None,
            "steps_timed": len(times), "step_s": [round(t, 4) for t in times],
            "step_cpu_s": [round(t, 4) for t in cpu], "generated_tokens": toks}


# -- the loss cross-check ------------------------------------------------------------------

def _fixed_batch(tok: Any, prompts: list[str], seed: int) -> dict[str, Any]:
    import torch

    g = torch.Generator().manual_seed(seed)
    ids = [tok(p, add_special_tokens=False)["input_ids"] for p in prompts]
    plen = min(len(x) for x in ids)
    prompt_ids = torch.tensor([x[-plen:] for x in ids])  # equal lengths: no padding shifts
    B = len(prompts)
    C = 6
    lengths = [C - (i % 3) for i in range(B)]
    comp = torch.randint(3, len(tok), (B, C), generator=g)
    cmask = torch.zeros(B, C, dtype=torch.long)
    for i, n in enumerate(lengths):
        cmask[i, :n] = 1
        comp[i, n:] = int(tok.pad_token_id)
    adv = torch.tensor([1.0, -0.7, 0.4, -1.2, 0.9, -0.3][:B] + [0.5] * max(0, B - 6))
    return {"prompt_ids": prompt_ids, "prompt_mask": torch.ones_like(prompt_ids),
            "completion_ids": comp, "completion_mask": cmask, "advantages": adv, "gen": g}


def loss_crosscheck(trainer: Any, tok: Any, prompts: list[str], *, beta: float, clip: float,
                    seed: int = 0) -> dict[str, Any]:
    """Per-token GRPO loss of ceiling (:func:`~ceiling.train._loss.grpo_loss`, log-probs
    from :func:`~ceiling.train._loss.sequence_logprobs`) and of TRL (``_compute_loss``) on
    one fixed batch; returns the largest absolute differences."""
    import torch

    from ._loss import LossConfig, grpo_loss, sequence_logprobs

    model = trainer.model
    model.eval()
    b = _fixed_batch(tok, prompts, seed)
    P = b["prompt_ids"].shape[1]
    ids = torch.cat([b["prompt_ids"], b["completion_ids"]], 1)
    att = torch.cat([b["prompt_mask"], b["completion_mask"]], 1)
    C = b["completion_ids"].shape[1]
    with torch.no_grad():
        logp = sequence_logprobs(model, ids, att)[:, P - 1:P - 1 + C]
    g = b["gen"]
    old = logp + 0.3 * torch.randn(logp.shape, generator=g)  # ratios away from 1: clipping
    ref = logp + 0.5 * torch.randn(logp.shape, generator=g)
    cfg = LossConfig(beta=beta, clip_low=clip, clip_high=clip, aggregation="token")
    inputs = {k: b[k] for k in ("prompt_ids", "prompt_mask", "completion_ids",
                                "completion_mask", "advantages")}
    inputs.update(old_per_token_logps=old, ref_per_token_logps=ref,
                  num_items_in_batch=b["completion_mask"].sum())
    ours: list[float] = []
    theirs: list[float] = []
    saved = trainer.loss_type
    trainer.loss_type = "bnpo"  # token mean: with one token unmasked it is that token's loss
    try:
        with torch.no_grad():
            for i in range(logp.shape[0]):
                for t in range(int(b["completion_mask"][i].sum())):
                    one = torch.zeros_like(b["completion_mask"])
                    one[i, t] = 1
                    lo, _ = grpo_loss(logp, old, ref, b["advantages"], one, cfg)
                    ours.append(float(lo))
                    theirs.append(float(trainer._compute_loss(model, {**inputs, "tool_mask": one})))
            full = b["completion_mask"]
            agg_ours = {a: float(grpo_loss(logp, old, ref, b["advantages"], full,
                                           LossConfig(beta=beta, clip_low=clip, clip_high=clip,
                                                      aggregation=a))[0])
                        for a in ("token", "sequence")}
            agg_trl = {}
            for a, lt in (("token", "bnpo"), ("sequence", "grpo")):
                trainer.loss_type = lt
                agg_trl[a] = float(trainer._compute_loss(model, inputs))
    finally:
        trainer.loss_type = saved
    ratio = torch.exp(logp - old)
    clipped = int((((ratio < 1 - clip) | (ratio > 1 + clip)).long() * b["completion_mask"]).sum())
    return {
        "tokens": len(ours),
        "tokens_outside_clip_range": clipped,
        "max_abs_diff_per_token_loss": max(abs(x - y) for x, y in zip(ours, theirs,
                                                                       strict=True)),
        "max_abs_per_token_loss": max(abs(x) for x in ours),
        "aggregate": {a: {"ceiling": agg_ours[a], "trl": agg_trl[a],
                          "abs_diff": abs(agg_ours[a] - agg_trl[a])} for a in agg_ours},
        "beta": beta, "clip": clip,
    }


def crosscheck_trainer(path: Path, prompts: list[str], workdir: Path, *, beta: float = 0.04,
                       clip: float = 0.2, r: int = 4) -> tuple[Any, Any]:
    """A GRPOTrainer on ``path`` (not trained) for :func:`loss_crosscheck`."""
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from ._model import LORA_TARGETS

    tok = AutoTokenizer.from_pretrained(str(path))
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(str(path))
    names = {n.rsplit(".", 1)[-1] for n, _ in model.named_modules()}
    lora = LoraConfig(r=r, lora_alpha=2 * r, bias="none", task_type="CAUSAL_LM",
                      target_modules=[t for t in LORA_TARGETS if t in names])
    args = GRPOConfig(output_dir=str(workdir / "trl-x"), use_cpu=True, bf16=False,
                      report_to="none", save_strategy="no", per_device_train_batch_size=4,
                      num_generations=4, max_completion_length=8, beta=beta, epsilon=clip,
                      loss_type="bnpo", use_bias_correction_kl=False,
                      gradient_checkpointing=False, max_steps=1)
    def zero(completions: list[str], **_: Any) -> list[float | None]:
        return [0.0] * len(completions)

    trainer = GRPOTrainer(model=model, reward_funcs=zero, args=args, train_dataset=Dataset.from_dict({"prompt": prompts}),
        processing_class=tok, peft_config=lora)
    import torch

    with torch.no_grad():  # a non-zero adapter, so the check covers the adapted model
        gen = torch.Generator().manual_seed(1)
        for n, p in trainer.model.named_parameters():  # type: ignore[union-attr]
            if "lora_B" in n:
                p.copy_(0.05 * torch.randn(p.shape, generator=gen))
    return trainer, tok


# -- the whole benchmark -------------------------------------------------------------------

def run_train_bench(s: TrainBenchSettings = TrainBenchSettings(),
                    progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The JSON-ready benchmark (see the module doc)."""
    import torch

    if not trl_available():
        raise ConfigError("the train benchmark needs TRL for the comparison",
                          fix="pip install trl  (the 'dev' extra)")
    say = progress or (lambda _m: None)
    threads_before = torch.get_num_threads()
    if s.threads:
        torch.set_num_threads(s.threads)
    try:
        return _run(s, say)
    finally:
        torch.set_num_threads(threads_before)


def _run(s: TrainBenchSettings, say: Callable[[str], None]) -> dict[str, Any]:
    import torch

    with tempfile.TemporaryDirectory(prefix="ceiling-bench-train-") as d:
        work = Path(d)
        say("preparing the base")
        path, label = bench_base(s.base, work)
        prompts, names = bench_prompts(s.prompts)
        reward = make_reward(dict(zip(prompts, names, strict=True)))
        rounds: list[tuple[dict[str, Any], dict[str, Any]]] = []
        for r in range(s.rounds):  # the order alternates, so a drift of the machine's
            # speed during the run does not favour whichever trainer always goes first
            pair: dict[str, dict[str, Any]] = {}
            for who in (("ceiling", "trl") if r % 2 == 0 else ("trl", "ceiling")):
                say(f"round {r + 1}/{s.rounds}: " + ("ceiling GRPO steps" if who == "ceiling"
                                                     else "TRL GRPOTrainer steps"))
                pair[who] = (_ceiling_steps(path, s, prompts, reward) if who == "ceiling"
                             else _trl_steps(path, s, prompts, reward, work / f"trl{r}"))
            rounds.append((pair["ceiling"], pair["trl"]))
        ours, trl = _pooled([a for a, _ in rounds]), _pooled([b for _, b in rounds])
        say("loss cross-check")
        trainer, tok = crosscheck_trainer(path, prompts, work, beta=s.beta, clip=s.clip)
        check = loss_crosscheck(trainer, tok, prompts, beta=s.beta, clip=s.clip, seed=s.seed)
    import trl as trl_mod

    ratio = (trl["s_per_step"] / ours["s_per_step"]
             if ours["s_per_step"] and trl["s_per_step"] else None)
    cpu_ratio = (trl["cpu_s_per_step"] / ours["cpu_s_per_step"]
                 if ours["cpu_s_per_step"] and trl["cpu_s_per_step"] else None)
    return {
        "base": label, "settings": asdict(s), "torch_threads": torch.get_num_threads(),
        "trl_version": trl_mod.__version__,
        "ceiling": ours, "trl": trl,
        "ratio_trl_over_ceiling_s_per_step": round(ratio, 3) if ratio else None,
        "ratio_trl_over_ceiling_cpu_s_per_step": round(cpu_ratio, 3) if cpu_ratio else None,
        "ceiling_over_trl_s_per_step": round(1 / ratio, 3) if ratio else None,
        "ceiling_over_trl_cpu_s_per_step": round(1 / cpu_ratio, 3) if cpu_ratio else None,
        "ratio_ceiling_over_trl_tokens_per_s": round(ours["tokens_per_s"] / trl["tokens_per_s"],
                                                     3) if trl["tokens_per_s"] and
        ours["tokens_per_s"] else None,
        "loss_check": check,
        "rounds": [{"ceiling_s_per_step": a["s_per_step"], "trl_s_per_step": b["s_per_step"],
                    "ceiling_over_trl": round(a["s_per_step"] / b["s_per_step"], 3)
                    if a["s_per_step"] and b["s_per_step"] else None} for a, b in rounds],
        "ceiling_over_trl_round_max": max((round(a["s_per_step"] / b["s_per_step"], 3)
                                           for a, b in rounds
                                           if a["s_per_step"] and b["s_per_step"]),
                                          default=None),
    }


def _pooled(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One trainer's summary over every round's timed steps (medians of all of them)."""
    if len(runs) == 1:
        return runs[0]
    out = _summary([x for r in runs for x in r["step_s"]],
                   [x for r in runs for x in r["generated_tokens"]],
                   [x for r in runs for x in r["step_cpu_s"]])
    if "groups_zero_variance" in runs[0]:
        out["groups_zero_variance"] = sum(r["groups_zero_variance"] for r in runs)
    return out


__all__ = ["TrainBenchSettings", "crosscheck_trainer", "loss_crosscheck", "run_train_bench",
           "trl_available"]
