"""The harness proper: one :class:`Dialogue` per episode renders prompts and parses replies.

``Harness(config)`` is shared by every episode of a run; ``harness.start(card)`` opens a
:class:`Dialogue` that holds the history. Per turn: ``dialogue.request()`` builds the
:class:`~ceiling.policies.PolicyRequest` (chat messages, and the raw prompt for the line
format), ``dialogue.parse(reply)`` returns one Action or raises :class:`ReplyError`, and
``dialogue.add(...)`` records the turn with its observation (truncated here, so the model
sees exactly what the trajectory stores).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..cards import TaskCard
from ..policies import PolicyRequest
from ..tools import CORE_TOOLS, Action
from ._bash import BashParseError, action_to_bash, parse_bash_reply
from ._config import (
    BASH_TOOLS_NOTE,
    FEW_SHOT_TASK,
    FEW_SHOT_TURNS,
    HarnessConfig,
    truncate_observation,
)
from ._json import JsonParseError, action_to_json, parse_json_reply, render_tool_list
from ._line import LineParseError, action_to_line, one_line, parse_line, render_line_episode

CORE_DESCRIPTIONS = {
    "run": "run a shell command in /workspace; you see stdout, stderr and the exit code",
    "read": "read a file",
    "write": "create or overwrite a file",
    "edit": "replace one exact occurrence of old with new in a file",
    "submit": "finish: the task is done",
    "give_up": "stop because the task cannot or should not be done",
}


class ReplyError(ValueError):
    """A reply that is not one valid tool call in the harness's format (a failed step)."""


def card_tool_table(card: TaskCard | None) -> dict[str, dict[str, str]]:
    """Core tools plus the card's tools: name -> {arg: description}."""
    table = {k: dict(v) for k, v in CORE_TOOLS.items()}
    for spec in (card.tools if card is not None else []):
        table[spec.name] = dict(spec.args)
    return table


@dataclass
class TurnRecord:
    reply: str  # what the policy wrote
    action: Action | None  # None when the reply did not parse
    observation: str  # the observation body as shown to the model (truncated)
    error: str | None = None


@dataclass
class Dialogue:
    """The harness's view of one episode: the card, its tools and the turns so far."""

    harness: Harness
    card: TaskCard
    tools: dict[str, dict[str, str]]
    turns: list[TurnRecord] = field(default_factory=list)

    @property
    def config(self) -> HarnessConfig:
        return self.harness.config

    def _window(self) -> tuple[list[TurnRecord], int]:
        n = self.config.history_turns
        if n is None or len(self.turns) <= n:
            return self.turns, 0
        return self.turns[-n:], len(self.turns) - n

    def prompt_text(self) -> str:
        """The line-protocol prompt (ends with ``"> "``)."""
        shown, _ = self._window()
        pairs = [(self._action_line(t), t.observation) for t in shown]
        return render_line_episode(self.card.instruction, pairs)

    def _action_line(self, t: TurnRecord) -> str:
        first = t.reply.replace("\r\n", "\n").split("\n", 1)[0].strip()
        if first.startswith(">"):
            first = first[1:].strip()
        if not first and t.action is not None:
            first = action_to_line(t.action, self.tools)
        return one_line(first)

    def messages(self) -> list[dict[str, str]]:
        """The chat for the json and bash formats: system (tools), user (task), then turns."""
        system = self.config.system_template().replace("{tools}", self._tool_text())
        shown, omitted = self._window()
        task = f"Task: {self.card.instruction}"
        if omitted:
            task += f"\n\n[{omitted} earlier turns are not shown]"
        msgs = [{"role": "system", "content": system}, *self.example_messages(),
                {"role": "user", "content": task}]
        for t in shown:
            msgs.append({"role": "assistant", "content": t.reply})
            msgs.append({"role": "user", "content": t.observation})
        return msgs

    def example_messages(self) -> list[dict[str, str]]:
        """The worked example as chat turns (user task, assistant reply, user observation,
        ..., assistant submit), replies written in this format's syntax; empty when the
        config shows none. Roles alternate, so strict chat templates accept it."""
        if not self.config.shows_example:
            return []
        msgs = [{"role": "user", "content": f"Task: {FEW_SHOT_TASK}"}]
        for tool, args, obs in FEW_SHOT_TURNS:
            msgs.append({"role": "assistant", "content": self.format_reply(Action(tool, args))})
            if obs is not None:
                msgs.append({"role": "user", "content": obs})
        return msgs

    def _tool_text(self) -> str:
        if self.config.format != "bash":
            return render_tool_list(self.tools, self._descriptions())
        extra = {n: a for n, a in self.tools.items() if n not in CORE_DESCRIPTIONS
                 and len(a) == 1}
        if not extra:
            return ""
        desc = self._descriptions()
        lines = "\n".join(f"- ```{n} ... ```: {desc.get(n, '')}".rstrip(": ") for n in extra)
        return BASH_TOOLS_NOTE.replace("{tools}", lines)

    def _descriptions(self) -> dict[str, str]:
        d = dict(CORE_DESCRIPTIONS)
        for spec in self.card.tools:
            d[spec.name] = spec.description
        return d

    def plan_history(self) -> list[tuple[Action, str]]:
        """Every turn as (action, observation); a reply that did not parse appears as
        ``Action("invalid", {"raw": reply})`` so a plan's step count stays right."""
        return [(t.action if t.action is not None else Action("invalid", {"raw": t.reply[:200]}),
                 t.observation) for t in self.turns]

    def request(self) -> PolicyRequest:
        """The pending turn as a policy request. ``context`` carries what only scripted
        policies may use: the card, the (action, observation) history, the step number and
        ``format_reply`` (Action -> reply text in this harness's format)."""
        ctx: dict[str, Any] = {
            "card": self.card,
            "history": self.plan_history(),
            "step": len(self.turns),
            "format_reply": self.format_reply,
            "tools": self.tools,
        }
        if self.config.format == "line":
            prompt = self.prompt_text()
            return PolicyRequest(messages=[{"role": "user", "content": prompt}], prompt=prompt,
                                 context=ctx)
        return PolicyRequest(messages=self.messages(), prompt=None, context=ctx)

    def parse(self, reply: str, *, finish_reason: str = "stop") -> Action:
        """One Action from a reply, or :class:`ReplyError` saying what was wrong."""
        cfg = self.config
        if len(reply) > cfg.max_reply_chars:
            raise ReplyError(f"reply too long ({len(reply)} characters; the limit is "
                             f"{cfg.max_reply_chars}): write one short tool call")
        try:
            if cfg.format == "line":
                return parse_line(reply, self.tools)
            if cfg.format == "bash":
                return parse_bash_reply(reply, self.tools, cut=finish_reason == "length")
            return parse_json_reply(reply, self.tools)
        except (LineParseError, JsonParseError, BashParseError) as e:
            msg = str(e)
            if finish_reason == "length":
                msg += " (the reply was cut at the token limit)"
            raise ReplyError(msg) from None

    def format_reply(self, action: Action) -> str:
        """Reply text that this harness parses back into ``action``."""
        if self.config.format == "line":
            return action_to_line(action, self.tools)
        if self.config.format == "bash":
            return action_to_bash(action, self.tools)
        return action_to_json(action)

    def observe(self, text: str) -> str:
        """The observation body the model will see for an environment observation."""
        body = text.rstrip("\n")
        if not body.strip():
            body = "[ok]"
        return truncate_observation(body, self.config.obs_max_bytes, self.config.obs_max_lines)

    def add(self, reply: str, action: Action | None, observation: str, *,
            error: str | None = None, raw: bool = False) -> str:
        """Record a turn; returns the observation body as stored (truncated unless ``raw``).
        For a parse failure pass ``action=None`` and ``error``: the body is
        ``[error] <error>``."""
        if action is None and error is not None:
            body = f"[error] {one_line(error)}"
        elif raw:
            body = observation
        else:
            body = self.observe(observation)
        self.turns.append(TurnRecord(reply, action, body, error))
        return body


class Harness:
    """Renders prompts and parses replies for one :class:`HarnessConfig`.

    ``tokenizer`` (optional) is the chat tokenizer a policy renders json prompts with; its
    chat template enters :attr:`fingerprint`.
    """

    def __init__(self, config: HarnessConfig | None = None, *, tokenizer: Any = None) -> None:
        self.config = config or HarnessConfig()
        self.tokenizer = tokenizer
        self.fingerprint = self.config.fingerprint(tokenizer)

    def start(self, card: TaskCard) -> Dialogue:
        return Dialogue(self, card, card_tool_table(card))

    def tools(self, card: TaskCard | None = None) -> Mapping[str, Mapping[str, str]]:
        return card_tool_table(card)

    def __repr__(self) -> str:
        return f"Harness(format={self.config.format!r}, fingerprint={self.fingerprint[:12]})"
