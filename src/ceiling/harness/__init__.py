"""The harness: turns a text policy into an agent (prompts in, one tool call out).

Three formats: the line protocol for tiny completion models (:mod:`._line`, a fixed
contract shared with the tiny base's corpus), JSON tool calls for chat models trained on
tool use (:mod:`._json`) and bash blocks, one fenced shell block per turn, for instruct
models that answer in prose and code (:mod:`._bash`).
``Harness(HarnessConfig(...)).start(card)`` gives a per-episode :class:`Dialogue`.
"""

from ._bash import BashParseError, action_to_bash, parse_bash_reply
from ._config import (
    CHAT_DEFAULT_FORMAT,
    FEW_SHOT_TASK,
    FEW_SHOT_TURNS,
    FORMATS,
    HarnessConfig,
    default_format,
    truncate_observation,
)
from ._harness import CORE_DESCRIPTIONS, Dialogue, Harness, ReplyError, TurnRecord, card_tool_table
from ._json import JsonParseError, action_to_json, parse_json_reply, render_tool_list
from ._line import (
    LineParseError,
    action_to_line,
    escape_content,
    format_observation,
    parse_line,
    render_line_episode,
    unescape_content,
)

__all__ = [
    "CHAT_DEFAULT_FORMAT", "CORE_DESCRIPTIONS", "FEW_SHOT_TASK", "FEW_SHOT_TURNS", "FORMATS", "BashParseError", "Dialogue", "Harness", "HarnessConfig",
    "JsonParseError", "LineParseError", "ReplyError", "TurnRecord", "action_to_bash",
    "action_to_json", "action_to_line", "card_tool_table", "default_format", "escape_content",
    "format_observation", "parse_bash_reply", "parse_json_reply", "parse_line",
    "render_line_episode", "render_tool_list", "truncate_observation", "unescape_content",
]
