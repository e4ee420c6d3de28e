"""The policy contract: a batch of prompts in; texts, token ids and log-probs out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class SamplingParams:
    """How a model samples a reply. ``temperature`` 0 is greedy (the argmax, no
    randomness); ``top_p`` < 1 keeps the smallest set of tokens whose probability reaches
    it (nucleus sampling); ``stop`` strings end a reply."""

    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 128
    stop: tuple[str, ...] = ()
    seed: int | None = None


def sampling_params(*, temperature: float | None = None, top_p: float | None = None,
                    max_new_tokens: int | None = None, seed: int | None = None,
                    stop: tuple[str, ...] = ()) -> SamplingParams:
    """:class:`SamplingParams` from user settings (None: the default), checked: a bad value
    raises ConfigError naming the command-line flag and the valid range."""
    from .._errors import ConfigError

    d = SamplingParams()
    t = d.temperature if temperature is None else float(temperature)
    p = d.top_p if top_p is None else float(top_p)
    n = d.max_new_tokens if max_new_tokens is None else int(max_new_tokens)
    if not t >= 0:
        raise ConfigError(f"temperature {t} is negative", where="--temperature",
                          fix="use 0 (greedy) or a positive value such as 0.7 or 1.0")
    if not 0 < p <= 1:
        raise ConfigError(f"top-p {p} is outside (0, 1]", where="--top-p",
                          fix="use a value in (0, 1], e.g. 0.95; 1 turns it off")
    if n < 1:
        raise ConfigError(f"max-new-tokens {n} allows no reply", where="--max-new-tokens",
                          fix="use 1 or more, e.g. 256")
    return SamplingParams(temperature=t, top_p=p, max_new_tokens=n, stop=stop, seed=seed)


@dataclass
class PolicyRequest:
    """One pending turn. ``messages`` is the chat history (role/content dicts);
    ``prompt`` is the same history rendered as raw text for completion-style models (the
    line protocol); ``context`` carries episode facts only scripted policies may use
    (the card, the step number) and is never shown to a model."""

    messages: list[dict[str, str]]
    prompt: str | None = None
    context: dict[str, Any] = field(default_factory=dict)


@dataclass
class Generation:
    """One reply to one :class:`PolicyRequest`: its text and, where the policy knows them,
    the reply's token ids with their sampling log-probabilities (what GRPO's importance
    ratio needs) and the prompt's token ids. ``finish_reason`` is ``"length"`` when the
    token budget cut the reply; ``error`` (with ``finish_reason="error"``) marks a request
    the policy failed on, which the rollout records as an ``infra_error`` step, never a
    crash."""

    text: str
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)  # one per token id, sampling policy
    prompt_token_ids: list[int] = field(default_factory=list)
    finish_reason: str = "stop"  # "stop" | "length" | "error"
    error: str | None = None  # set when the policy failed on this request (infra_error)
    usage: dict[str, int] = field(default_factory=dict)  # token counts reported by an API


@runtime_checkable
class Policy(Protocol):
    """Anything that answers a batch of turns: scripted plans, a ``transformers`` model (with
    a LoRA adapter), an OpenAI-compatible endpoint. ``spec`` is the string that loads it
    again (``load_policy(spec)``) and names it in stored runs. One batched
    :meth:`generate` per rollout round over every live episode; policies that keep
    per-episode state may also define ``end_episode(episode_id)``."""

    spec: str

    def generate(self, requests: Sequence[PolicyRequest],
                 sampling: SamplingParams) -> list[Generation]:
        """One Generation per request, in order. Must not raise for one bad request: mark it
        with ``error`` instead."""
        ...
