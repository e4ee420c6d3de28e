"""HarnessConfig fingerprints, the json format, truncation and the per-episode dialogue."""

from __future__ import annotations

import pytest

from ceiling.cards import TaskCard, ToolSpec
from ceiling.harness import (
    Harness,
    HarnessConfig,
    JsonParseError,
    ReplyError,
    parse_json_reply,
    truncate_observation,
)
from ceiling.tools import CORE_TOOLS, Action


def _card(**kw: object) -> TaskCard:
    return TaskCard(id="terminal_ops/demo-v1", type="terminal_ops", horizon="short",
                    instruction="Create a.txt\ncontaining hi.", **kw)  # type: ignore[arg-type]


class _Tok:
    def __init__(self, template: str) -> None:
        self.chat_template = template


def test_fingerprint_is_stable_and_sensitive() -> None:
    a, b = HarnessConfig(), HarnessConfig()
    assert a.fingerprint() == b.fingerprint() and len(a.fingerprint()) == 64
    assert HarnessConfig(obs_max_lines=10).fingerprint() != a.fingerprint()
    assert HarnessConfig(format="line").fingerprint() != a.fingerprint()
    assert HarnessConfig(keep_prompts=True).fingerprint() == a.fingerprint()
    assert a.fingerprint(_Tok("A")) != a.fingerprint(_Tok("B")) != a.fingerprint()
    # the line format never shows a chat template, so it does not enter the key
    line = HarnessConfig(format="line")
    assert line.fingerprint(_Tok("A")) == line.fingerprint()
    assert line.stop_strings == ("\n",) and a.stop_strings == ()


def test_config_rejects_unknown_fields() -> None:
    with pytest.raises(Exception, match="extra"):
        HarnessConfig(formt="line")  # type: ignore[call-arg]


def test_json_reply_forms() -> None:
    t = CORE_TOOLS
    want = Action("run", {"cmd": "ls"})
    assert parse_json_reply('{"tool": "run", "args": {"cmd": "ls"}}', t) == want
    assert parse_json_reply('Sure.\n```json\n{"tool": "run", "args": {"cmd": "ls"}}\n```', t) == want
    assert parse_json_reply('{"name": "run", "arguments": "{\\"cmd\\": \\"ls\\"}"}', t) == want
    assert parse_json_reply('{"tool": "submit"}', t) == Action("submit")
    for bad, msg in [("", "empty"), ("just text", "no JSON object"), ('{"x": 1}', "no \"tool\""),
                     ('{"tool": "fly", "args": {}}', "unknown tool"),
                     ('{"tool": "run", "args": [1]}', "args")]:
        with pytest.raises(JsonParseError, match=msg):
            parse_json_reply(bad, t)


def test_truncation_keeps_head_and_tail() -> None:
    text = "\n".join(f"line {i}" for i in range(200))
    out = truncate_observation(text, 10_000, 20)
    lines = out.split("\n")
    assert len(lines) <= 20 and lines[0] == "line 0" and lines[-1] == "line 199"
    assert "lines" in out and "cut" in out
    big = truncate_observation("y" * 50_000, 512, 40)
    assert len(big.encode()) <= 600 and "bytes cut" in big
    assert truncate_observation("short", 512, 40) == "short"


def test_line_dialogue_renders_history_and_errors() -> None:
    h = Harness(HarnessConfig(format="line", history_turns=2))
    d = h.start(_card())
    req = d.request()
    assert req.prompt == "task: Create a.txt containing hi.\n> "
    a = d.parse("run: echo hi > a.txt\n")
    d.add("run: echo hi > a.txt", a, "")
    with pytest.raises(ReplyError, match="not an action line"):
        d.parse("I think I should")
    d.add("I think I should", None, "", error="not an action line")
    d.add("run: cat a.txt", Action("run", {"cmd": "cat a.txt"}), "hi\n")
    p = d.request().prompt
    assert p is not None
    # window of 2: the first turn is gone, the failed step shows its error
    assert p == ("task: Create a.txt containing hi.\n> I think I should\n"
                 "| [error] not an action line\n> run: cat a.txt\n| hi\n> ")
    assert d.request().context["history"][0][0] == a
    assert d.format_reply(Action("submit")) == "submit"


def test_json_dialogue_messages_and_card_tools() -> None:
    card = _card(tools=[ToolSpec(name="sql", description="query the db", args={"query": "SQL"})])
    h = Harness(HarnessConfig(format="json", max_reply_chars=100))
    d = h.start(card)
    msgs = d.request().messages
    assert msgs[0]["role"] == "system" and "- sql(query): query the db" in msgs[0]["content"]
    assert msgs[1] == {"role": "user", "content": "Task: Create a.txt\ncontaining hi."}
    act = d.parse('{"tool": "sql", "args": {"query": "SELECT 1"}}')
    d.add(d.format_reply(act), act, "1\n")
    msgs = d.request().messages
    assert msgs[-2]["role"] == "assistant" and msgs[-1] == {"role": "user", "content": "1"}
    with pytest.raises(ReplyError, match="too long"):
        d.parse("x" * 101)
    with pytest.raises(ReplyError, match="cut at the token limit"):
        d.parse('{"tool": "run", "args": {"cmd": "l', finish_reason="length")
