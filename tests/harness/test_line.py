"""The line protocol is a fixed contract (the tiny base is pre-trained on it): pin it."""

from __future__ import annotations

import pytest

from ceiling.harness import (
    LineParseError,
    action_to_line,
    escape_content,
    format_observation,
    parse_line,
    render_line_episode,
    unescape_content,
)
from ceiling.sandbox import ExecResult
from ceiling.tools import Action


def test_contract_example_is_byte_exact() -> None:
    text = render_line_episode("Create the file notes_fox.txt containing hello.",
                               [("run: echo hello > notes_fox.txt", "[ok]"), ("submit", "")])
    assert text == ("task: Create the file notes_fox.txt containing hello.\n"
                    "> run: echo hello > notes_fox.txt\n| [ok]\n> submit\n")


def test_prompt_ends_with_action_marker_and_flattens_instruction() -> None:
    assert render_line_episode("line one\nline two", []) == "task: line one line two\n> "
    text = render_line_episode("t", [("run: ls", "a\nb\n[exit 2]")])
    assert text == "task: t\n> run: ls\n| a\n| b\n| [exit 2]\n> "
    assert render_line_episode("t", [("give_up: no such file", "")]).endswith("give_up: no such file\n")


def test_format_observation_of_exec_results() -> None:
    assert format_observation(ExecResult(0, "", "", 0.1)) == "[ok]"
    assert format_observation(ExecResult(0, "hi\n", "", 0.1)) == "hi"
    assert format_observation(ExecResult(2, "out\n", "err\n", 0.1)) == "out\nerr\n[exit 2]"
    assert format_observation(ExecResult(-9, "", "", 5.0, timed_out=True)) == "[timed out]\n[exit -9]"
    assert format_observation("") == "[ok]"
    assert format_observation("file text\n") == "file text"


@pytest.mark.parametrize("action", [
    Action("run", {"cmd": "echo hi > a.txt"}),
    Action("run", {"cmd": "printf 'a\\nb'\nls"}),  # multi-line command -> JSON form
    Action("read", {"path": "logs/app.log"}),
    Action("write", {"path": "a.txt", "content": "x\ny\\n literal backslash-n \n"}),
    Action("write", {"path": "has <<< sep", "content": "c"}),
    Action("edit", {"path": "a.py", "old": "x = 1", "new": "x = 2"}),
    Action("submit"),
    Action("give_up", {"reason": "the input file does not exist"}),
    Action("give_up", {"reason": ""}),
])
def test_actions_round_trip(action: Action) -> None:
    line = action_to_line(action)
    assert "\n" not in line
    assert parse_line(line) == action


def test_card_tools_short_and_json_forms() -> None:
    tools = {"run": {"cmd": ""}, "submit": {}, "sql": {"query": "SQL"}, "search": {"q": "", "k": ""}}
    assert parse_line("sql: SELECT 1", tools) == Action("sql", {"query": "SELECT 1"})
    assert parse_line('sql: {"query": "SELECT 2"}', tools) == Action("sql", {"query": "SELECT 2"})
    assert parse_line('search: {"q": "x", "k": 3}', tools) == Action("search", {"q": "x", "k": 3})
    assert action_to_line(Action("sql", {"query": "SELECT 1"}), tools) == "sql: SELECT 1"
    with pytest.raises(LineParseError, match="2 arguments"):
        parse_line("search: x", tools)


def test_reply_tolerance() -> None:
    assert parse_line("run: ls -l   \nsecond line ignored") == Action("run", {"cmd": "ls -l"})
    assert parse_line("> submit") == Action("submit")
    assert parse_line("give_up") == Action("give_up", {"reason": ""})


@pytest.mark.parametrize("reply,msg", [
    ("", "empty reply"),
    ("hello there", "not an action line"),
    ("rm: -rf /", "unknown tool 'rm'"),
    ("write: a.txt", "write needs"),
    ("submit now: please", "not an action line|unknown tool"),
    ("run:", "run needs"),
    ("submit: extra", "takes no argument"),
])
def test_bad_replies_say_why(reply: str, msg: str) -> None:
    with pytest.raises(LineParseError, match=msg):
        parse_line(reply)


def test_escape_round_trip() -> None:
    s = "a\\b\nc\\nd\re"
    assert "\n" not in escape_content(s)
    assert unescape_content(escape_content(s)) == s
    assert unescape_content("keep \\t") == "keep \\t"
