"""HarnessConfig: every knob that changes what a model sees, hashed into a fingerprint.

A score is a claim about a (model, harness) pair, so the fingerprint covers the format,
the effective system prompt, truncation, history window, reply limits, stop strings, the
line-protocol version and (when a tokenizer renders the chat) the chat template's SHA-256.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

LINE_PROTOCOL_VERSION = "1"
FORMATS = ("bash", "json", "line")

DEFAULT_JSON_SYSTEM = (
    "You are an agent working in a Linux sandbox; your working directory is /workspace. "
    "Each turn, call exactly one tool: reply with ONE JSON object "
    '{"tool": NAME, "args": {...}} (you may wrap it in a ```json fence). '
    "You see the tool's result in the next message. When the task is done, call submit. "
    "If the task cannot be done (for example a required input does not exist), call give_up "
    "with the reason instead of guessing.\n\nTools:\n{tools}"
)
DEFAULT_BASH_SYSTEM = (
    "You are an agent working in a Linux shell; your working directory is /workspace. "
    "Each turn, reply with exactly one shell block, like this:\n```bash\nls -l\n```\n"
    "It runs with /bin/sh in /workspace and you see its output in the next message. "
    "Run one step at a time. When the task is done, reply with:\n```bash\nsubmit\n```\n"
    "If the task cannot be done (for example a file it needs does not exist), reply with:\n"
    "```bash\ngive_up: the reason\n```{tools}"
)
#: The worked example shown before the task when ``few_shot`` is on: one short episode of
#: a task unlike any built-in template (making a folder), as (task, [(tool, args,
#: observation)]). It shows the reply format, reading ``[ok]`` as success and submitting.
#: One step, then submit: a two-step example taught SmolLM2 to repeat its command instead
#: of submitting (docs/harness.md, "Choosing a format").
FEW_SHOT_TASK = "Make a folder named build."
FEW_SHOT_TURNS: tuple[tuple[str, dict[str, str], str | None], ...] = (
    ("run", {"cmd": "mkdir build"}, "[ok]"),
    ("submit", {}, None),
)
BASH_TOOLS_NOTE = ("\n\nOther tools: a block tagged with the tool's name calls it with the "
                   "block as its argument:\n{tools}")


class HarnessConfig(BaseModel):
    """How prompts are rendered and replies parsed.

    ``format``: ``"line"`` (the line protocol for completion-style tiny models; no system
    prompt is ever shown, the format is fixed), ``"json"`` (JSON tool calls for chat
    models, rendered through the tokenizer's chat template by the policy) or ``"bash"``
    (one fenced shell block per turn, :mod:`._bash`; what untrained instruct models write).
    ``system_prompt`` (json and bash): a template where ``{tools}`` is replaced by the tool
    list (bash: by a note on the card's own tools, or nothing); None means the built-in one. Observations are cut to ``obs_max_lines`` lines and
    ``obs_max_bytes`` bytes (head and tail kept, a marker says how much was cut).
    ``history_turns``: only the last N turns are shown (None: all). Replies longer than
    ``max_reply_chars`` are failed steps. ``stop``: None means ``("\\n",)`` for line and
    none for json and bash. ``few_shot`` (json and bash): show one worked example episode
    (:data:`FEW_SHOT_TASK`, in the format's own reply syntax) as earlier chat turns before
    the task; None means on for bash (measured in docs/harness.md: it lifts SmolLM2's share
    of parsed turns) and off for json. The line protocol is fixed and never shows one.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["line", "json", "bash"] = "json"
    system_prompt: str | None = None
    obs_max_bytes: int = Field(default=2048, ge=64)
    obs_max_lines: int = Field(default=40, ge=2)
    history_turns: int | None = Field(default=None, ge=1)
    max_reply_tokens: int = Field(default=256, ge=1)
    max_reply_chars: int = Field(default=8000, ge=16)
    stop: tuple[str, ...] | None = None
    keep_prompts: bool = False  # store each turn's rendered prompt text in trajectories
    few_shot: bool | None = None

    @model_validator(mode="after")
    def _line_has_no_example(self) -> HarnessConfig:
        if self.format == "line" and self.few_shot:
            raise ValueError("few_shot: the line protocol is a fixed contract and shows no "
                             "example; use the bash or json format, or leave few_shot unset")
        return self

    @property
    def shows_example(self) -> bool:
        """Whether the worked example precedes the task (``few_shot`` resolved)."""
        if self.format == "line":
            return False
        return self.few_shot if self.few_shot is not None else self.format == "bash"

    @property
    def stop_strings(self) -> tuple[str, ...]:
        if self.stop is not None:
            return self.stop
        return ("\n",) if self.format == "line" else ()

    def system_template(self) -> str:
        if self.system_prompt is not None:
            return self.system_prompt
        return DEFAULT_BASH_SYSTEM if self.format == "bash" else DEFAULT_JSON_SYSTEM

    def canonical(self) -> dict[str, Any]:
        """The effective settings (defaults resolved) that the fingerprint hashes."""
        d = self.model_dump(mode="json")
        d["stop"] = list(self.stop_strings)
        d["system_prompt"] = self.system_template() if self.format != "line" else None
        d["line_protocol"] = LINE_PROTOCOL_VERSION if self.format == "line" else None
        d.pop("keep_prompts")  # storage only; never changes what a model sees
        d["few_shot"] = self.shows_example
        if self.shows_example:  # the example's text is part of what the model sees
            d["few_shot_example"] = [FEW_SHOT_TASK, [list(t) for t in FEW_SHOT_TURNS]]
        return d

    def fingerprint(self, tokenizer: Any = None) -> str:
        """SHA-256 (hex) of the canonical JSON settings, plus the SHA-256 of the tokenizer's
        chat template when a tokenizer renders the chat (json format)."""
        d = self.canonical()
        template = getattr(tokenizer, "chat_template", None) if tokenizer is not None else None
        if self.format != "line" and isinstance(template, str):
            d["chat_template_sha"] = hashlib.sha256(template.encode()).hexdigest()
        blob = json.dumps(d, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()


#: The format a chat model gets when none is named (measured in docs/harness.md: share of
#: turns that parse, per format, on SmolLM2-135M-Instruct).
CHAT_DEFAULT_FORMAT = "bash"


def default_format(tokenizer: Any = None) -> str:
    """The harness format for a policy whose tokenizer is ``tokenizer``: ``line`` for a
    completion model without a chat template (the tiny base), :data:`CHAT_DEFAULT_FORMAT`
    for a model with one, ``json`` when there is no tokenizer (scripted and API policies,
    whose format the caller names)."""
    if tokenizer is None:
        return "json"
    return CHAT_DEFAULT_FORMAT if getattr(tokenizer, "chat_template", None) else "line"


def truncate_observation(text: str, max_bytes: int, max_lines: int) -> str:
    """Cut ``text`` to at most ``max_lines`` lines and about ``max_bytes`` UTF-8 bytes,
    keeping the head and the tail (where exit codes and errors are) around one marker line
    ``[... N lines / M bytes cut ...]``. Text within both limits is returned unchanged."""
    lines = text.split("\n")
    size = len(text.encode())
    if len(lines) <= max_lines and size <= max_bytes:
        return text
    keep = max(2, max_lines - 1)
    head_n, tail_n = (keep + 1) // 2, keep // 2
    if len(lines) > max_lines:
        head, tail = lines[:head_n], lines[len(lines) - tail_n:]
    else:
        head, tail = lines, []
    budget = max(32, max_bytes - 40)

    def fit(part: list[str], limit: int, from_end: bool) -> list[str]:
        out: list[str] = []
        used = 0
        seq = reversed(part) if from_end else iter(part)
        for line in seq:
            b = len(line.encode()) + 1
            if used + b > limit:
                room = limit - used
                if room > 8:
                    raw = line.encode()
                    piece = raw[-room:] if from_end else raw[:room]
                    out.append(piece.decode(errors="ignore"))
                break
            out.append(line)
            used += b
        return list(reversed(out)) if from_end else out

    head_kept = fit(head, budget // 2 if tail else budget, False)
    tail_kept = fit(tail, budget - sum(len(x.encode()) + 1 for x in head_kept), True)
    cut_lines = len(lines) - len(head_kept) - len(tail_kept)
    cut_bytes = size - sum(len(x.encode()) + 1 for x in head_kept + tail_kept)
    marker = f"[... {max(cut_lines, 0)} lines / {max(cut_bytes, 0)} bytes cut ...]"
    return "\n".join([*head_kept, marker, *tail_kept])
