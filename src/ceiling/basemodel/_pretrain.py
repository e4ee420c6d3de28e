"""Pre-training of ``builtin:tiny``: a ~1M-parameter Llama on the built-in corpus.

Recipe (shared/research/cpu-feasibility.md §3, §5): hidden 128, 4 layers, 4 heads, FFN
352, tied embeddings, fp32; whole episodes packed into 128-token blocks (an episode never
straddles two blocks, so every block starts at a task), AdamW (0.9, 0.95), warm-up then
cosine decay. The budget is a number of *steps*, so a build is reproducible on one machine
and thread count; ``minutes`` is only a safety cap (a capped build says so in its report).

Phase 2 puts the loss on the agent's action lines only (instructions hold random names,
observations are the environment's): it concentrates the gradient on copying names from
the task into the command, which phase 1 alone learned too slowly on a loaded CPU.

``corpus="multistep"`` builds ``builtin:tiny-multistep``: the multistep corpus
(:func:`._corpus.generate_multistep`: chains of 2-4 demo operations, a quarter one-command
episodes) in ``block``-token blocks (192: a 4-step episode is up to ~145 tokens), usually
from ``init`` = the tiny fixture (same tokenizer, phase 1 skipped).

The result is a plain Hugging Face folder (``config.json``, ``model.safetensors``,
``tokenizer.json`` …) that ``AutoModelForCausalLM.from_pretrained`` loads, plus
``build.json`` with the recipe and the figures measured on held-out corpus tasks.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from . import _corpus
from ._tokenizer import train_tokenizer

BLOCK = 128


@dataclass
class BuildConfig:
    """Everything that defines a build (recorded in build.json)."""

    steps: int = 150
    batch_size: int = 32
    lr: float = 3e-3
    warmup: int = 30
    seed: int = 0
    episodes: int = 30_000
    noise: float = 0.5
    vocab_size: int = 1024
    hidden: int = 128
    layers: int = 4
    heads: int = 4
    ffn: int = 352
    max_positions: int = 2048  # RoPE: no parameters, only how long a prompt may grow
    threads: int = 1  # the fixture was built with 1; other counts are not bit-identical
    max_minutes: float = 30.0
    action_steps: int = 600  # phase 2: loss on action lines only
    action_lr: float = 3e-3
    init: str | None = None  # continue from an earlier build's folder (skips phase 1)
    eval_tasks: int = 100
    eval_samples: int = 8
    corpus: str = "demo"  # demo (builtin:tiny) | multistep (builtin:tiny-multistep)
    block: int = BLOCK  # tokens per packed block
    step_noise: float = 0.35  # multistep corpus: chance of a wrong command per step


@dataclass
class BuildReport:
    out: str
    config: dict[str, Any]
    params: int
    steps_done: int
    capped: bool
    seconds: float
    tokens_seen: int
    tokens_per_s: float
    final_loss: float
    eval: dict[str, Any] = field(default_factory=dict)
    words: list[str] = field(default_factory=list)


def _pack(ids_list: list[list[int]], masks: list[list[int]], pad: int,
          rng: random.Random, block: int = BLOCK) -> tuple[list[list[int]], list[list[int]]]:
    """Greedy-pack whole episodes into ``block``-token blocks (pads at the end); the masks
    (1 = an action-line token) travel with them."""
    order = list(range(len(ids_list)))
    rng.shuffle(order)
    blocks: list[list[int]] = []
    bmasks: list[list[int]] = []
    cur: list[int] = []
    cm: list[int] = []
    for i in order:
        ids, m = ids_list[i][:block], masks[i][:block]
        if len(cur) + len(ids) > block:
            blocks.append(cur + [pad] * (block - len(cur)))
            bmasks.append(cm + [0] * (block - len(cm)))
            cur, cm = [], []
        cur, cm = cur + ids, cm + m
    if cur:
        blocks.append(cur + [pad] * (block - len(cur)))
        bmasks.append(cm + [0] * (block - len(cm)))
    return blocks, bmasks


def _pieces(text: str) -> list[tuple[str, int]]:
    """An episode's text cut at line starts: (piece, 1 if it is an action line's body)."""
    out: list[tuple[str, int]] = []
    for line in text.splitlines(keepends=True):
        if line.startswith("> "):
            out += [("> ", 0), (line[2:], 1)]
        else:
            out.append((line, 0))
    return out


def encode_episodes(tok: Any, texts: list[str]) -> tuple[list[list[int]], list[list[int]]]:
    """Token ids (+ EOS) and action masks. Pieces are tokenized apart; since whitespace is
    its own pre-token, that equals tokenizing the whole text (checked on a sample)."""
    eos = tok.eos_token_id
    pieces = [_pieces(t) for t in texts]
    flat = [p for ps in pieces for p, _ in ps]
    enc = tok(flat, add_special_tokens=False)["input_ids"]
    ids_list: list[list[int]] = []
    masks: list[list[int]] = []
    i = 0
    for ps in pieces:
        ids: list[int] = []
        m: list[int] = []
        for _, flag in ps:
            ids += enc[i]
            m += [flag] * len(enc[i])
            i += 1
        ids_list.append(ids + [eos])
        masks.append(m + [1])  # the model learns to end an episode
    for t, ids in zip(texts[:50], ids_list[:50], strict=False):
        if tok(t, add_special_tokens=False)["input_ids"] != ids[:-1]:
            raise RuntimeError("piecewise tokenization differs from whole-text tokenization")
    return ids_list, masks


def _train_phase(model: Any, data: Any, masks: Any, pad: int, *, steps: int, lr: float,
                 warmup: int, batch_size: int, seed: int, action_only: bool, deadline: float,
                 progress: Callable[[int, int, float], None] | None,
                 offset: int, total: int) -> tuple[int, int, float, bool]:
    """AdamW with warm-up and cosine decay to 10 %; loss on every token, or (``action_only``)
    on action-line tokens only. Returns (steps done, tokens, final loss EMA, capped)."""
    import torch

    torch.manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.01)

    def lr_at(step: int) -> float:
        if step < warmup:
            return lr * (step + 1) / warmup
        frac = (step - warmup) / max(1, steps - warmup)
        return lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, frac))))

    gen = torch.Generator().manual_seed(seed)
    model.train()
    tokens = 0
    loss_ema = float("nan")
    perm = torch.randperm(len(data), generator=gen)
    pos = 0
    for step in range(steps):
        if time.perf_counter() > deadline:
            return step, tokens, loss_ema, True
        if pos + batch_size > len(perm):
            perm, pos = torch.randperm(len(data), generator=gen), 0
        idx = perm[pos:pos + batch_size]
        batch = data[idx]
        pos += batch_size
        labels = batch.clone()
        labels[batch == pad] = -100
        if action_only:
            labels[masks[idx] == 0] = -100
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        loss = model(input_ids=batch, attention_mask=(batch != pad).long(), labels=labels).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        tokens += int((batch != pad).sum())
        lv = float(loss.detach())
        loss_ema = lv if math.isnan(loss_ema) else 0.95 * loss_ema + 0.05 * lv
        if progress and step % 10 == 0:
            progress(offset + step, total, loss_ema)
    model.eval()
    return steps, tokens, loss_ema, False


def build_tiny(out: Path, cfg: BuildConfig | None = None,
               progress: Callable[[int, int, float], None] | None = None) -> BuildReport:
    """Generate the corpus, train the tokenizer and the model, evaluate, save to ``out``.

    Two phases: ``steps`` with the loss on every token (the language of episodes), then
    ``action_steps`` with the loss on action lines only (what the agent writes; this is
    where copying names from the task into the command is learned). With ``init`` (a
    folder written by an earlier build with the same corpus settings) phase 1 is taken from
    it. ``out`` is replaced atomically. ``progress(step, steps, loss)`` every 10 steps.
    """
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    cfg = cfg or BuildConfig()
    torch.manual_seed(cfg.seed)
    torch.set_num_threads(cfg.threads)
    rng = random.Random(cfg.seed)
    if cfg.corpus not in ("demo", "multistep"):
        from .._errors import ConfigError

        raise ConfigError(f"unknown corpus {cfg.corpus!r}", where="corpus",
                          fix="use demo or multistep")
    episodes = (_corpus.generate_multistep(cfg.episodes, cfg.seed, noise=cfg.noise,
                                           step_noise=cfg.step_noise)
                if cfg.corpus == "multistep" else
                _corpus.generate(cfg.episodes, cfg.seed, noise=cfg.noise))
    texts = _corpus.render(episodes)
    tok: Any = (AutoTokenizer.from_pretrained(cfg.init) if cfg.init
                else train_tokenizer(texts, cfg.vocab_size))
    eos, pad = tok.eos_token_id, tok.pad_token_id
    ids_list, mask_list = encode_episodes(tok, texts)
    blocks, bmasks = _pack(ids_list, mask_list, pad, rng, cfg.block)
    data = torch.tensor(blocks, dtype=torch.long)
    masks = torch.tensor(bmasks, dtype=torch.long)

    if cfg.init:
        model = LlamaForCausalLM.from_pretrained(cfg.init, dtype=torch.float32)
    else:
        mcfg = LlamaConfig(vocab_size=len(tok), hidden_size=cfg.hidden,
                           num_hidden_layers=cfg.layers, num_attention_heads=cfg.heads,
                           num_key_value_heads=cfg.heads, intermediate_size=cfg.ffn,
                           max_position_embeddings=cfg.max_positions, tie_word_embeddings=True,
                           bos_token_id=eos, eos_token_id=eos, pad_token_id=pad,
                           rms_norm_eps=1e-5)
        torch.manual_seed(cfg.seed)
        model = LlamaForCausalLM(mcfg)
    params = sum(p.numel() for p in model.parameters())
    t0 = time.perf_counter()
    deadline = t0 + cfg.max_minutes * 60
    total = (0 if cfg.init else cfg.steps) + cfg.action_steps
    done1 = tok1 = 0
    loss = float("nan")
    capped = False
    if not cfg.init:
        done1, tok1, loss, capped = _train_phase(
            model, data, masks, pad, steps=cfg.steps, lr=cfg.lr, warmup=cfg.warmup,
            batch_size=cfg.batch_size, seed=cfg.seed, action_only=False, deadline=deadline,
            progress=progress, offset=0, total=total)
    done2 = tok2 = 0
    if not capped and cfg.action_steps:
        done2, tok2, loss, capped = _train_phase(
            model, data, masks, pad, steps=cfg.action_steps, lr=cfg.action_lr,
            warmup=cfg.warmup, batch_size=cfg.batch_size, seed=cfg.seed + 1, action_only=True,
            deadline=deadline, progress=progress, offset=done1, total=total)
    seconds = time.perf_counter() - t0
    model.eval()
    figures = evaluate_corpus(model, tok, n=cfg.eval_tasks, samples=cfg.eval_samples,
                              seed=cfg.seed + 10_000)
    if cfg.corpus == "multistep":
        figures["multistep"] = evaluate_multistep(model, tok, n=cfg.eval_tasks,
                                                  samples=cfg.eval_samples,
                                                  seed=cfg.seed + 20_000)
    tokens = tok1 + tok2
    report = BuildReport(out=str(out), config=asdict(cfg), params=params,
                         steps_done=done1 + done2, capped=capped, seconds=round(seconds, 1),
                         tokens_seen=tokens, tokens_per_s=round(tokens / max(seconds, 1e-9), 1),
                         final_loss=round(loss, 4), eval=figures,
                         words=list(_corpus.TRAIN_WORDS))
    if cfg.init and (Path(cfg.init) / "build.json").is_file():
        report.eval["init_build"] = json.loads((Path(cfg.init) / "build.json").read_text())
    _save(model, tok, out, report)
    return report


def _save(model: Any, tok: Any, out: Path, report: BuildReport) -> None:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    model.generation_config.pad_token_id = tok.pad_token_id
    model.save_pretrained(tmp, safe_serialization=True)
    tok.save_pretrained(tmp)
    (tmp / "build.json").write_text(json.dumps(asdict(report), indent=1, sort_keys=True) + "\n")
    if out.exists():
        old = out.parent / f".{out.name}.old-{os.getpid()}"
        out.rename(old)
        tmp.rename(out)
        shutil.rmtree(old)
    else:
        tmp.rename(out)


def evaluate_corpus(model: Any, tok: Any, *, n: int = 200, samples: int = 8,
                    seed: int = 10_000) -> dict[str, Any]:
    """Greedy and sampled (T=1) exact match of the first action line on ``n`` held-out
    feasible corpus tasks, and the share of tasks with at least one exact sample among
    ``samples`` (a corpus-level pass@k). By kind, too."""
    import torch

    rng = random.Random(f"ceiling-tiny-eval|{seed}")
    eps = [_corpus.make_episode(rng, noise=0.0, p_missing=0.0, p_transient=0.0, p_look=0.0)
           for _ in range(n)]
    prompts = [_corpus.prompt_of(e.instruction) for e in eps]
    greedy = complete(model, tok, prompts, do_sample=False)
    sampled = complete(model, tok, [p for p in prompts for _ in range(samples)],
                       do_sample=True, seed=seed)
    by_kind: dict[str, list[float]] = {}
    g_hits = s_hits = any_hits = 0
    for i, e in enumerate(eps):
        g = greedy[i] == e.correct
        s = [sampled[i * samples + j] == e.correct for j in range(samples)]
        g_hits += g
        s_hits += sum(s)
        any_hits += any(s)
        by_kind.setdefault(e.kind, []).append(sum(s) / samples)
    del torch
    return {
        "tasks": n, "samples": samples,
        "greedy_exact": round(g_hits / n, 4),
        "sampled_exact": round(s_hits / (n * samples), 4),
        f"any_of_{samples}_exact": round(any_hits / n, 4),
        "sampled_exact_by_kind": {k: round(sum(v) / len(v), 3) for k, v in sorted(by_kind.items())},
        "example": {"prompt": prompts[0], "greedy": greedy[0], "want": eps[0].correct},
    }


def evaluate_multistep(model: Any, tok: Any, *, n: int = 100, samples: int = 8,
                       seed: int = 20_000) -> dict[str, Any]:
    """On ``n`` held-out noise-free chains (2-4 steps): the exact-match rate of the next
    action line at every step given the correct history (``submit`` after the last), greedy
    and sampled, by step; and the share of chains whose every step is right greedily."""
    rng = random.Random(f"ceiling-tiny-multistep-eval|{seed}")
    eps = [_corpus.make_multistep_episode(rng, noise=0.0, p_skip=0.0, p_early=0.0, p_alt=0.0)
           for _ in range(n)]
    items = [(i, j, _corpus.render_episode(e.instruction, e.turns[:j]), e.turns[j][0])
             for i, e in enumerate(eps) for j in range(len(e.turns))]
    prompts = [p for _, _, p, _ in items]
    greedy = complete(model, tok, prompts, do_sample=False)
    sampled = complete(model, tok, [p for p in prompts for _ in range(samples)],
                       do_sample=True, seed=seed)
    chain_ok = [True] * n
    by_step: dict[int, list[float]] = {}
    g_hits = s_hits = 0.0
    for k, (i, j, _, want) in enumerate(items):
        g = greedy[k] == want
        s = sum(sampled[k * samples + m] == want for m in range(samples)) / samples
        chain_ok[i] &= g
        g_hits += g
        s_hits += s
        by_step.setdefault(j, []).append(s)
    return {
        "chains": n, "prompts": len(items), "samples": samples,
        "greedy_step_exact": round(g_hits / len(items), 4),
        "sampled_step_exact": round(s_hits / len(items), 4),
        "greedy_chain_exact": round(sum(chain_ok) / n, 4),
        "sampled_step_exact_by_step": {str(j): round(sum(v) / len(v), 3)
                                       for j, v in sorted(by_step.items())},
    }


def complete(model: Any, tok: Any, prompts: list[str], *, do_sample: bool, seed: int = 0,
             max_new_tokens: int = 40, batch: int = 64) -> list[str]:
    """One action line per prompt (generation stops at the first newline)."""
    import torch

    nl = tok.convert_tokens_to_ids("Ċ")
    out: list[str] = []
    tok.padding_side = "left"
    if do_sample:
        torch.manual_seed(seed)
    for i in range(0, len(prompts), batch):
        enc = tok(prompts[i:i + batch], return_tensors="pt", padding=True)
        with torch.no_grad():
            gen = model.generate(**enc, do_sample=do_sample, max_new_tokens=max_new_tokens,
                                 eos_token_id=[nl, tok.eos_token_id],
                                 pad_token_id=tok.pad_token_id,
                                 temperature=1.0 if do_sample else None, top_k=0 if do_sample
                                 else None, top_p=1.0 if do_sample else None)
        for row in gen[:, enc["input_ids"].shape[1]:]:
            text = tok.decode(row, skip_special_tokens=True)
            out.append(text.split("\n", 1)[0])
    return out
