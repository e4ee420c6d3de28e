"""The ``hf`` policy: a local Hugging Face causal LM (optional PEFT adapter), CPU or CUDA.

Batched sampling with left padding and a KV cache, written out here rather than through
``model.generate`` so the recorded log-probs are exactly those of the distribution sampled
from: ``log_softmax(processed logits)`` where processing is ``logits / temperature`` then
the top-p (nucleus) mask (tokens outside the nucleus get -inf, so the kept ones are
renormalised). Temperature 0 is greedy and records the unprocessed model log-probs. A
trainer that recomputes log-probs must apply the same processing.

Replies stop at the tokenizer's EOS or at the first stop string; the returned
``token_ids`` include the token that completed the stop string (or the EOS), the ``text``
ends before the stop string. ``prompt_token_ids`` are the prompt's ids without padding.
Line-format requests (``request.prompt`` set) are tokenized as raw text; chat requests go
through the tokenizer's chat template.

A LoRA model of at most :data:`MERGE_MAX_PARAMS` parameters samples with the adapter
merged into the base weights (:func:`merged_lora`): on a small model the LoRA branch's
extra kernels cost more than the merge. The exact base weights are written back after each
batch (a float merge/unmerge would leave rounding residue in the frozen base); recorded
log-probs then differ from the unmerged model's by float rounding only (~1e-6).
"""

from __future__ import annotations

import inspect
import os
import threading
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .._errors import PolicyError
from . import _mask4d
from ._types import Generation, PolicyRequest, SamplingParams


def _check_model_dir(path: str | os.PathLike[str], what: str) -> Path:
    p = Path(path).expanduser()
    if not p.exists():
        raise PolicyError(f"{what} path {str(p)!r} does not exist", where=str(p),
                          fix="point at a folder written by save_pretrained "
                              "(config.json + weights)")
    if not p.is_dir():
        raise PolicyError(f"{what} path {str(p)!r} is not a folder", where=str(p),
                          fix="point at the model folder, not a file inside it")
    marker = "adapter_config.json" if what == "adapter" else "config.json"
    if not (p / marker).is_file():
        raise PolicyError(f"no {marker} in {str(p)!r}", where=str(p),
                          fix=f"point at a {what} folder written by save_pretrained")
    return p


class HFPolicy:
    """A transformers causal LM as a text policy. ``model`` and ``tokenizer`` are public
    so a trainer can reuse them (the adapter, when given, is a trainable PeftModel).

    A trainer may pass its live ``model`` and ``tokenizer`` instead of a path: the model
    stays on its device (unless ``device`` is given) and its train/eval mode is restored
    after each ``generate``. The tokenizer is switched to left padding (and gets
    ``pad = eos`` when it has no pad token)."""

    def __init__(self, path: str | os.PathLike[str], adapter: str | os.PathLike[str] | None = None,
                 *, device: str | None = None, dtype: str = "float32", spec: str | None = None,
                 max_batch: int = 64, model: Any = None, tokenizer: Any = None) -> None:
        if model is None or tokenizer is None:  # fail fast, before the heavy imports
            _check_model_dir(path, "model")
            if adapter is not None:
                _check_model_dir(adapter, "adapter")
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.spec = spec or (f"hf:{path}+{adapter}" if adapter else f"hf:{path}")
        self.max_batch = max_batch
        if device in (None, "auto") and model is not None:
            first = next(iter(model.parameters()), None)  # a live model stays where it is
            device = str(first.device) if first is not None else "cpu"
        if device in (None, "auto"):
            device = "cuda" if torch.cuda.is_available() else "cpu"
        elif device.startswith("cuda") and not torch.cuda.is_available():
            raise PolicyError("a CUDA device was asked for but none is available",
                              fix="drop --device or use --device cpu")
        self.device = torch.device(device)
        if model is None or tokenizer is None:
            mpath = _check_model_dir(path, "model")
            tdtype = getattr(torch, dtype, None)
            if not isinstance(tdtype, torch.dtype):
                raise PolicyError(f"unknown dtype {dtype!r}", fix="use float32, bfloat16 or float16")
            tokenizer = AutoTokenizer.from_pretrained(str(mpath))
            model = AutoModelForCausalLM.from_pretrained(str(mpath), dtype=tdtype)
            if adapter is not None:
                from peft import PeftModel

                apath = _check_model_dir(adapter, "adapter")
                model = PeftModel.from_pretrained(model, str(apath))
        self.tokenizer = tokenizer
        self.model = model.to(self.device)
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.tokenizer.padding_side = "left"
        base = self.model.get_base_model() if hasattr(self.model, "get_base_model") else self.model
        params = inspect.signature(base.forward).parameters
        # transformers 5.x renamed past_key_values -> cache (older models keep the old name)
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        self._keep_kw = "logits_to_keep" in params

    # -- rendering -----------------------------------------------------------------------
    def render(self, req: PolicyRequest) -> tuple[str, bool]:
        """The prompt text and whether the tokenizer should add special tokens."""
        if req.prompt is not None:
            return req.prompt, True
        if not getattr(self.tokenizer, "chat_template", None):
            raise PolicyError("the tokenizer has no chat template, so it cannot render chat "
                              "messages", fix="use the line format (--harness-format line)")
        text = self.tokenizer.apply_chat_template(req.messages, tokenize=False,
                                                  add_generation_prompt=True)
        return str(text), False

    def encode(self, req: PolicyRequest, max_new_tokens: int = 0) -> list[int]:
        """Prompt token ids. A prompt longer than the model's context (less the reply
        budget) keeps its LAST tokens: the recorded ``prompt_token_ids`` are the ids the
        model actually saw. Use a harness history window to avoid the cut."""
        text, special = self.render(req)
        ids = list(self.tokenizer(text, add_special_tokens=special)["input_ids"])
        limit = getattr(getattr(self.model, "config", None), "max_position_embeddings", None)
        if isinstance(limit, int) and len(ids) + max_new_tokens > limit:
            keep = max(1, limit - max_new_tokens)
            ids = ids[-keep:]
        return ids

    # -- generation ----------------------------------------------------------------------
    def generate(self, requests: Sequence[PolicyRequest],
                 sampling: SamplingParams) -> list[Generation]:
        out: list[Generation | None] = [None] * len(requests)
        encoded: list[tuple[int, list[int]]] = []
        for i, req in enumerate(requests):
            try:
                encoded.append((i, self.encode(req, sampling.max_new_tokens)))
            except Exception as e:  # noqa: BLE001 - becomes Generation(error=...)
                out[i] = Generation(text="", finish_reason="error", error=str(e))
        was_training = bool(getattr(self.model, "training", False))
        if was_training:  # no dropout while sampling; a trainer's mode is restored below
            self.model.eval()
        try:
            with _MERGE_LOCK, merged_lora(self.model):
                for start in range(0, len(encoded), self.max_batch):
                    chunk = encoded[start:start + self.max_batch]
                    gens = self._generate_ids([ids for _, ids in chunk], sampling)
                    for (i, _), g in zip(chunk, gens, strict=True):
                        out[i] = g
        finally:
            if was_training:
                self.model.train()
        return [g if g is not None else Generation(text="", finish_reason="error",
                                                   error="not generated") for g in out]

    def _generate_ids(self, prompts: list[list[int]], sp: SamplingParams) -> list[Generation]:
        import torch

        tok = self.tokenizer
        pad = int(tok.pad_token_id)
        eos = tok.eos_token_id
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), pad, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for r, p in enumerate(prompts):
            if p:
                ids[r, width - len(p):] = torch.tensor(p)
                mask[r, width - len(p):] = 1
        ids, mask = ids.to(self.device), mask.to(self.device)
        gen = torch.Generator(device=self.device)
        gen.manual_seed(sp.seed if sp.seed is not None else int(torch.randint(0, 2**62, (1,))))
        n = len(prompts)
        new_ids: list[list[int]] = [[] for _ in range(n)]
        new_lp: list[list[float]] = [[] for _ in range(n)]
        reason = ["length"] * n
        done = [False] * n
        stop = [s for s in sp.stop if s]
        dense = _mask4d.dense_ok(self.model)
        dtype = next(iter(self.model.parameters())).dtype if dense else None
        with torch.inference_mode():
            pos = (mask.cumsum(-1) - 1).clamp(min=0)
            extra = {"logits_to_keep": 1} if self._keep_kw else {}
            res = self.model(input_ids=ids, position_ids=pos, use_cache=True, **extra,
                             attention_mask=_mask4d.prefill_mask(mask, dtype) if dense else mask)
            past = _cache_of(res)
            logits = res.logits[:, -1, :].float()
            last_pos = pos[:, -1]
            rows = list(range(n))  # the request each row of the running batch belongs to
            for _ in range(sp.max_new_tokens):
                nxt, lp = self._sample(logits, sp, gen)
                for r, t, lv in zip(rows, nxt.tolist(), lp.tolist(), strict=True):
                    if done[r]:
                        continue
                    new_ids[r].append(t)
                    new_lp[r].append(lv)
                    if eos is not None and t == eos or stop and self._may_stop(t, stop) and \
                            self._hit_stop(new_ids[r], stop):
                        done[r], reason[r] = True, "stop"
                if all(done):
                    break
                live = [i for i, r in enumerate(rows) if not done[r]]
                if len(live) <= 0.75 * len(rows) and hasattr(past, "batch_select_indices"):
                    # finished rows leave the batch (a quarter at a time, so the copy pays):
                    # replies stop at different lengths and the batch ran to the longest
                    keep = torch.tensor(live, device=self.device)
                    past.batch_select_indices(keep)
                    nxt, mask, last_pos = nxt[keep], mask[keep], last_pos[keep]
                    rows = [rows[i] for i in live]
                mask = torch.cat([mask, torch.ones((len(rows), 1), dtype=mask.dtype,
                                                   device=self.device)], 1)
                last_pos = last_pos + 1
                res = self.model(input_ids=nxt[:, None], position_ids=last_pos[:, None],
                                 attention_mask=_mask4d.step_mask(mask, dtype) if dense else mask,
                                 use_cache=True, **{self._cache_kw: past})
                past = _cache_of(res)
                logits = res.logits[:, -1, :].float()
        gens = []
        for r in range(n):
            text = tok.decode(new_ids[r], skip_special_tokens=True)
            for s in stop:
                k = text.find(s)
                if k != -1:
                    text = text[:k]
            gens.append(Generation(text=text, token_ids=new_ids[r], logprobs=new_lp[r],
                                   prompt_token_ids=list(prompts[r]), finish_reason=reason[r]))
        return gens

    def _may_stop(self, token: int, stop: list[str]) -> bool:
        """False only when ``token`` cannot complete any stop string: every stop string is
        ASCII and the token's text lacks its last character (the decode of the tail is
        then skipped). Token texts are cached."""
        cache: dict[int, str] = self.__dict__.setdefault("_token_text", {})
        text = cache.get(token)
        if text is None:
            text = cache[token] = self.tokenizer.decode([token], skip_special_tokens=True)
        return any(not x.isascii() or x[-1] in text for x in stop)

    def _hit_stop(self, ids: list[int], stop: list[str]) -> bool:
        tail = self.tokenizer.decode(ids[-16:], skip_special_tokens=True)
        return any(s in tail for s in stop)

    @staticmethod
    def _sample(logits: Any, sp: SamplingParams, gen: Any) -> tuple[Any, Any]:
        """Process, sample and return (token ids, log-probs under the processed dist.)."""
        import torch

        if sp.temperature <= 0:
            logp = torch.log_softmax(logits, -1)
            nxt = logits.argmax(-1)
            return nxt, logp.gather(-1, nxt[:, None])[:, 0]
        z = logits / sp.temperature
        if sp.top_p < 1.0:
            z = top_p_mask(z, sp.top_p)
        logp = torch.log_softmax(z, -1)
        nxt = draw(logp.exp(), gen)
        return nxt, logp.gather(-1, nxt[:, None])[:, 0]


def draw(probs: Any, gen: Any) -> Any:
    """One token per row of ``probs`` ``[B, V]`` by inverting the cumulative distribution
    with one uniform draw per row (float64 sums; a token of probability 0 is never drawn).
    The same distribution as ``torch.multinomial(probs, 1)``, which on CPU draws a full
    row of exponentials per sample: ~1 ms per call for 32 rows of a 814-token vocabulary
    here against ~0.1 ms, and a tiny model's decode step costs a few ms."""
    import torch

    cdf = probs.to(torch.float64).cumsum(-1)
    u = torch.rand((probs.shape[0], 1), generator=gen, dtype=torch.float64,
                   device=probs.device) * cdf[:, -1:]
    return torch.searchsorted(cdf, u, right=True)[:, 0].clamp_(max=probs.shape[-1] - 1)


MERGE_MAX_PARAMS = 20_000_000  # above this the LoRA branch is a small share of a forward
_MERGE_LOCK = threading.RLock()  # merging writes shared weights: one batch at a time
_N_PARAMS: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()


@contextmanager
def merged_lora(model: Any) -> Iterator[None]:
    """Within the block, ``model`` (a PEFT LoRA model of at most :data:`MERGE_MAX_PARAMS`
    parameters, adapters enabled and not merged) computes with ``W + B @ A * scale`` in its
    base layers and the LoRA branches switched off; afterwards the exact base weights and
    the branches are restored. Any other model is left as it is.
    Not for use while the model trains."""
    import torch

    layers = _lora_layers(model)
    if not layers:
        yield
        return
    weights = [m.get_base_layer().weight for m in layers]
    saved = [w.detach().clone() for w in weights]
    try:
        with torch.no_grad():
            for m, w in zip(layers, weights, strict=True):
                for name in m.active_adapters:
                    if name in m.lora_A:
                        w.add_(m.get_delta_weight(name).to(w.dtype))
                # the layer computes base_layer(x) only (what its disable_adapters reads;
                # enable_adapters() would also toggle requires_grad, walking every module)
                m._disable_adapters = True
        yield
    finally:
        with torch.no_grad():
            for m, w, c in zip(layers, weights, saved, strict=True):
                w.copy_(c)
                m._disable_adapters = False


@contextmanager
def adapters_off(model: Any) -> Iterator[None]:
    """``model.disable_adapter()`` for a PEFT LoRA model (the base alone computes), by
    switching each LoRA layer's branch off directly: PEFT's context also walks every
    module twice to check and toggle ``requires_grad``, which costs a small model a good
    share of a forward pass. Other models go through ``model.disable_adapter()``."""
    layers = _lora_layers(model, any_size=True)
    if not layers:
        with model.disable_adapter():
            yield
        return
    try:
        for m in layers:
            m._disable_adapters = True
        yield
    finally:
        for m in layers:
            m._disable_adapters = False


def _lora_layers(model: Any, any_size: bool = False) -> list[Any]:
    """The LoRA layers of ``model`` when sampling through merged weights applies, else []."""
    try:
        from peft.tuners.lora import LoraLayer
    except ImportError:  # pragma: no cover - peft is a dependency
        return []
    layers = [m for m in model.modules() if isinstance(m, LoraLayer)]
    if any(m.merged or m.disable_adapters or m.use_dora.get(n, False) or
           not hasattr(m, "_disable_adapters") or not hasattr(m.get_base_layer(), "weight")
           for m in layers for n in m.active_adapters):
        return []
    n = _N_PARAMS.get(model)
    if n is None:
        n = _N_PARAMS[model] = sum(p.numel() for p in model.parameters())
    return layers if any_size or n <= MERGE_MAX_PARAMS else []


def _cache_of(res: Any) -> Any:
    cache = getattr(res, "cache", None)
    return cache if cache is not None else getattr(res, "past_key_values", None)


def top_p_mask(z: Any, top_p: float) -> Any:
    """Set logits outside the smallest set whose probability reaches ``top_p`` to -inf
    (the most likely token is always kept). Exposed so a trainer can reproduce it."""
    import torch

    sorted_z, idx = torch.sort(z, descending=True, dim=-1)
    probs = torch.softmax(sorted_z, -1)
    before = probs.cumsum(-1) - probs  # mass strictly before each token
    drop_sorted = before >= top_p
    drop = torch.zeros_like(drop_sorted).scatter(-1, idx, drop_sorted)
    return z.masked_fill(drop, float("-inf"))
