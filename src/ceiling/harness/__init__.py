"""The harness: turns a text policy into an agent (prompts in, one tool call out).

Two formats: the line protocol for tiny completion models (:mod:`._line`, a fixed
contract shared with the tiny base's corpus) and JSON tool calls for chat models.
``Harness(HarnessConfig(...)).start(card)`` gives a per-episode :class:`Dialogue`.
"""

from ._config import HarnessConfig, truncate_observation
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
    "CORE_DESCRIPTIONS", "Dialogue", "Harness", "HarnessConfig", "JsonParseError",
    "LineParseError", "ReplyError", "TurnRecord", "action_to_json", "action_to_line",
    "card_tool_table", "escape_content", "format_observation", "parse_json_reply", "parse_line",
    "render_line_episode", "render_tool_list", "truncate_observation", "unescape_content",
]
