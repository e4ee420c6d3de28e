"""The harness: turns a text policy into an agent (prompts in, one tool call out).

Two formats: the line protocol for tiny completion models (:mod:`._line`, a fixed
contract shared with the tiny base's corpus) and JSON tool calls for chat models.
"""

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
    "LineParseError", "action_to_line", "escape_content", "format_observation", "parse_line",
    "render_line_episode", "unescape_content",
]
