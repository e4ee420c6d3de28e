"""The policy contract: a batch of prompts in; texts, token ids and log-probs out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 128
    stop: tuple[str, ...] = ()
    seed: int | None = None


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
    text: str
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)  # one per token id, sampling policy
    prompt_token_ids: list[int] = field(default_factory=list)
    finish_reason: str = "stop"  # "stop" | "length" | "error"
    error: str | None = None  # set when the policy failed on this request (infra_error)
    usage: dict[str, int] = field(default_factory=dict)  # token counts reported by an API


@runtime_checkable
class Policy(Protocol):
    spec: str

    def generate(self, requests: Sequence[PolicyRequest],
                 sampling: SamplingParams) -> list[Generation]:
        """One Generation per request, in order. Must not raise for one bad request: mark it
        with ``error`` instead."""
        ...
