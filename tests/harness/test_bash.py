"""The bash-block format: parsing, submit/give-up, rendering, and a real episode through it."""

from __future__ import annotations

import itertools

import pytest

from ceiling.cards import TaskCard, ToolSpec
from ceiling.harness import (
    BashParseError,
    Harness,
    HarnessConfig,
    ReplyError,
    action_to_bash,
    default_format,
    parse_bash_reply,
)
from ceiling.tools import CORE_TOOLS, Action

FENCE = "```"


def _card(**kw: object) -> TaskCard:
    return TaskCard(id="terminal_ops/demo-v1", type="terminal_ops", horizon="short",
                    instruction="Create a.txt containing hi.", **kw)  # type: ignore[arg-type]


def test_one_fenced_block_runs() -> None:
    reply = f"Sure! First I list the files:\n{FENCE}bash\nls -l\n{FENCE}\nThis shows them."
    assert parse_bash_reply(reply, CORE_TOOLS) == Action("run", {"cmd": "ls -l"})
    for tag in ("", "sh", "shell", "console", "BASH"):
        assert parse_bash_reply(f"{FENCE}{tag}\necho hi > a.txt\n{FENCE}") == \
            Action("run", {"cmd": "echo hi > a.txt"})
    # a console transcript: the "$ " prompts go
    assert parse_bash_reply(f"{FENCE}console\n$ cd logs\n$ ls\n{FENCE}") == \
        Action("run", {"cmd": "cd logs\nls"})
    # a multi-line block is one command
    body = "for f in *.log; do\n  gzip \"$f\"\ndone"
    assert parse_bash_reply(f"{FENCE}bash\n{body}\n{FENCE}") == Action("run", {"cmd": body})


def test_several_blocks_run_the_first() -> None:
    reply = (f"Step 1:\n{FENCE}bash\nmkdir out\n{FENCE}\nStep 2:\n{FENCE}bash\n"
             f"cp a out/\n{FENCE}")
    assert parse_bash_reply(reply) == Action("run", {"cmd": "mkdir out"})
    # a python block first, then a shell block: the shell block runs
    reply = f"{FENCE}python\nprint(1)\n{FENCE}\n{FENCE}bash\nls\n{FENCE}"
    assert parse_bash_reply(reply) == Action("run", {"cmd": "ls"})


def test_submit_and_give_up() -> None:
    assert parse_bash_reply(f"Done.\n{FENCE}bash\nsubmit\n{FENCE}") == Action("submit")
    assert parse_bash_reply("submit") == Action("submit")
    assert parse_bash_reply(f"{FENCE}bash\ngive_up: data.csv does not exist\n{FENCE}") == \
        Action("give_up", {"reason": "data.csv does not exist"})
    assert parse_bash_reply("give_up: no such file") == \
        Action("give_up", {"reason": "no such file"})
    assert parse_bash_reply(f"{FENCE}\ngive_up\n{FENCE}") == Action("give_up", {"reason": ""})
    # "submit" inside a longer command is a command, not the end of the episode
    assert parse_bash_reply(f"{FENCE}bash\n./submit.sh\n{FENCE}").tool == "run"


@pytest.mark.parametrize("reply, msg", [
    ("", "empty reply"),
    ("I would run ls to see the files.", "no fenced shell block"),
    (f"{FENCE}bash\n\n{FENCE}", "block is empty"),
    (f"{FENCE}python\nprint(1)\n{FENCE}", "no shell block"),
])
def test_no_block_is_a_clear_error(reply: str, msg: str) -> None:
    with pytest.raises(BashParseError, match=msg):
        parse_bash_reply(reply, CORE_TOOLS)


def test_unclosed_block() -> None:
    # at the natural end of a reply the block runs to the end ...
    assert parse_bash_reply(f"{FENCE}bash\nls -l") == Action("run", {"cmd": "ls -l"})
    # ... but a reply cut at the token limit is refused, never run half-written
    with pytest.raises(BashParseError, match="cut at the token limit"):
        parse_bash_reply(f"{FENCE}bash\nrm -rf bui", cut=True)


def test_card_tool_blocks() -> None:
    tools = {**CORE_TOOLS, "sql": {"query": "one SQL statement"}}
    assert parse_bash_reply(f"{FENCE}sql\nSELECT 1\n{FENCE}", tools) == \
        Action("sql", {"query": "SELECT 1"})
    assert action_to_bash(Action("sql", {"query": "SELECT 1"}), tools) == \
        f"{FENCE}sql\nSELECT 1\n{FENCE}"


def test_actions_render_as_blocks_that_parse_back() -> None:
    for a in [Action("run", {"cmd": "ls -l"}), Action("submit"),
              Action("give_up", {"reason": "no input"})]:
        assert parse_bash_reply(action_to_bash(a)) == a
    # read/write/edit become shell commands; a fence inside the content gets a longer fence
    w = Action("write", {"path": "docs/a.md", "content": "x\n```\ny 'q'\n"})
    parsed = parse_bash_reply(action_to_bash(w))
    assert parsed.tool == "run" and "printf" in parsed.args["cmd"]
    assert parse_bash_reply(action_to_bash(Action("read", {"path": "a b.txt"}))) == \
        Action("run", {"cmd": "cat -- 'a b.txt'"})


def test_dialogue_in_bash_format() -> None:
    card = _card(tools=[ToolSpec(name="sql", description="query shop.db",
                                 args={"query": "SQL"})])
    d = Harness(HarnessConfig(format="bash")).start(card)
    msgs = d.request().messages
    assert msgs[0]["role"] == "system" and "```bash" in msgs[0]["content"]
    assert "submit" in msgs[0]["content"] and "give_up" in msgs[0]["content"]
    assert "```sql" in msgs[0]["content"]  # the card's own tool is explained
    assert msgs[-1] == {"role": "user", "content": f"Task: {card.instruction}"}
    with pytest.raises(ReplyError, match="no fenced shell block"):
        d.parse("ok")
    assert d.parse(d.format_reply(Action("run", {"cmd": "ls"}))) == Action("run", {"cmd": "ls"})
    fp = {f: HarnessConfig(format=f).fingerprint() for f in ("bash", "json", "line")}  # type: ignore[arg-type]
    assert len(set(fp.values())) == 3


def test_default_format() -> None:
    class Tok:
        chat_template: str | None = "{{ messages }}"

    assert default_format(None) == "json"
    assert default_format(Tok()) == "bash"
    Tok.chat_template = None
    assert default_format(Tok()) == "line"


def test_bash_episode_in_a_real_sandbox(tmp_path: object) -> None:
    """A prose-and-block reply drives a real episode to a pass (namespace sandbox)."""
    from ceiling.envs import make
    from ceiling.policies import Generation, PolicyRequest, SamplingParams
    from ceiling.rollout import run_episodes

    card = make("terminal_ops/demo-create-v1", seed=3, variant="train")
    cmd = card.solution.strip().split("\n")[-1]

    class Chatty:
        spec = "test:chatty"

        def generate(self, reqs: list[PolicyRequest], sp: SamplingParams) -> list[Generation]:
            out = []
            for r in reqs:
                step = r.context["step"]
                text = ("Let me look first.\n```bash\nls -la\n```" if step == 0 else
                        "I think the file should be made now." if step == 1 else
                        f"Here:\n```bash\n{cmd}\n```\nThat should do it." if step == 2 else
                        "All done!\n```bash\nsubmit\n```")
                out.append(Generation(text=text))
            return out

    [t] = run_episodes([card], Chatty(), HarnessConfig(format="bash"), progress=False)
    assert [u.parse_error is None for u in t.turns] == [True, False, True, True], t.error
    assert t.outcome == "solved", (t.outcome, t.error, [u.observation for u in t.turns])


def test_the_worked_example_precedes_the_task_in_the_format_s_own_syntax() -> None:
    """bash shows one worked episode before the task by default; json only when asked; the
    line protocol never (a fixed contract). Each example reply parses back to its action,
    roles alternate (strict chat templates), and the example enters the fingerprint."""
    from ceiling.harness import FEW_SHOT_TASK, FEW_SHOT_TURNS

    card = _card()
    msgs = Harness(HarnessConfig(format="bash")).start(card).request().messages
    roles = [m["role"] for m in msgs]
    assert roles[0] == "system" and roles[-1] == "user"
    assert all(a != b for a, b in itertools.pairwise(roles[1:])), roles
    assert msgs[1] == {"role": "user", "content": f"Task: {FEW_SHOT_TASK}"}
    assert msgs[-1] == {"role": "user", "content": f"Task: {card.instruction}"}
    replies = [m["content"] for m in msgs if m["role"] == "assistant"]
    assert [parse_bash_reply(r) for r in replies] == [Action(t, a) for t, a, _ in FEW_SHOT_TURNS]
    assert replies[-1] == f"{FENCE}bash\nsubmit\n{FENCE}"

    off = Harness(HarnessConfig(format="bash", few_shot=False)).start(card).request().messages
    assert [m["role"] for m in off] == ["system", "user"]
    assert Harness(HarnessConfig(format="json")).start(card).request().messages[1]["content"] \
        == f"Task: {card.instruction}"
    js = Harness(HarnessConfig(format="json", few_shot=True)).start(card).request().messages
    assert js[2]["role"] == "assistant" and '"tool": "run"' in js[2]["content"]

    with pytest.raises(ValueError, match="line protocol"):
        HarnessConfig(format="line", few_shot=True)
    assert not HarnessConfig(format="line").shows_example
    fps = {HarnessConfig(format="bash").fingerprint(),
           HarnessConfig(format="bash", few_shot=True).fingerprint(),
           HarnessConfig(format="bash", few_shot=False).fingerprint()}
    assert len(fps) == 2  # None resolves to True for bash: the same effective settings


def test_the_example_is_not_part_of_the_episode_history() -> None:
    """Turns the model takes come after the example; the history window and the step
    count see only the episode's own turns."""
    d = Harness(HarnessConfig(format="bash", history_turns=1)).start(_card())
    d.add(d.format_reply(Action("run", {"cmd": "ls"})), Action("run", {"cmd": "ls"}), "a.txt")
    d.add(d.format_reply(Action("run", {"cmd": "pwd"})), Action("run", {"cmd": "pwd"}), "/w")
    msgs = d.request().messages
    assert len(d.plan_history()) == 2
    assert "1 earlier turns are not shown" in msgs[-3]["content"]
    assert msgs[-2]["content"].endswith(f"pwd\n{FENCE}") and msgs[-1]["content"] == "/w"
