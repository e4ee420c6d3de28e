"""TaskEnv: the gymnasium contract, failed steps for bad input, budgets, faults, card tools."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator

import pytest

from ceiling.cards import Acceptance, Budget, Fault, TaskCard, ToolSpec
from ceiling.env import TaskEnv
from ceiling.tools import Action, card_tools
from ceiling.verify import Outcome

TESTS = '''import os
import pathlib


def test_out():
    assert (pathlib.Path(os.environ["WORKSPACE"]) / "out.txt").read_text() == "hi\\n"
'''


def _backend() -> str:
    from ceiling.sandbox import namespaces_available

    return "namespace" if namespaces_available() is None else "local"


BACKEND = _backend()


@pytest.fixture(autouse=True)
def _quiet_local() -> None:
    warnings.filterwarnings("ignore", message=".*backend 'local' has NO isolation.*")


def card(**kw: object) -> TaskCard:
    c = TaskCard(id="demo/env-v1", type="terminal_ops", horizon="short",
                 instruction="Write hi to out.txt.",
                 acceptance=Acceptance(tests=["test_t.py::test_out"], runner="files"), **kw)
    c.with_files(workspace={"data.bin": b"\x00\x01\x02binary", "notes.txt": "alpha\nbeta\n",
                            "shop.db": b""}, tests={"test_t.py": TESTS})
    c.solution = "echo hi > out.txt\n"
    return c


@pytest.fixture
def env() -> Iterator[TaskEnv]:
    e = TaskEnv(card(budget=Budget(max_steps=12, command_timeout_s=1.5)), backend=BACKEND)
    yield e
    e.close()


def step(e: TaskEnv, tool: str, **args: object) -> tuple[str, dict[str, object]]:
    obs, reward, term, trunc, info = e.step(Action(tool, dict(args)))
    assert reward == 0.0 and not term and not trunc
    return obs, info


def test_passes_gymnasium_env_checker(env: TaskEnv) -> None:
    from gymnasium.utils.env_checker import check_env

    check_env(env, skip_render_check=True)


def test_reset_returns_instruction_and_tools(env: TaskEnv) -> None:
    obs, info = env.reset(seed=1)
    assert obs == "Write hi to out.txt." and info["step"] == 0
    assert set(info["tools"]) == {"run", "read", "write", "edit", "submit", "give_up"}


def test_run_read_write_edit_and_submit(env: TaskEnv) -> None:
    env.reset()
    assert step(env, "run", cmd="echo out; echo err >&2; exit 3")[0] == "out\nerr\n[exit 3]"
    assert step(env, "run", cmd="true")[0] == "[ok]"
    assert step(env, "write", path="out.txt", content="hey\n")[0] == "wrote 4 bytes to out.txt"
    assert step(env, "edit", path="out.txt", old="hey", new="hi")[1]["error"] is None
    assert step(env, "read", path="out.txt")[0] == "hi"
    obs, reward, term, trunc, info = env.step('{"tool": "submit", "args": {}}')
    assert (obs, reward, term, trunc) == ("", 1.0, True, False)
    assert info["verdict"].outcome is Outcome.SOLVED and info["outcome"] == "solved"
    assert env.step({"tool": "run", "args": {"cmd": "ls"}})[2] is True  # over: no crash


@pytest.mark.parametrize(("raw", "needle"), [
    ("not json", "not a JSON tool call"),
    ({"tool": "explode", "args": {}}, "unknown tool 'explode'"),
    ({"tool": "run", "args": {}}, "missing argument 'cmd'"),
    ({"tool": "run", "args": {"cmd": 3}}, "must be a string"),
    ({"tool": "read", "args": {"path": "x", "extra": "1"}}, "unexpected argument"),
    ({"tool": "read", "args": {"path": "../../etc/passwd"}}, "../../etc/passwd"),
    ({"tool": "read", "args": {"path": "/etc/passwd"}}, "/etc/passwd"),
    ({"tool": "read", "args": {"path": "data.bin"}}, "binary file"),
    ({"tool": "read", "args": {"path": "nope.txt"}}, "no such file"),
    ({"tool": "edit", "args": {"path": "notes.txt", "old": "zzz", "new": "y"}}, "does not occur"),
    ({"tool": "write", "args": {"path": "../escape.txt", "content": "x"}}, "escape.txt"),
])
def test_invalid_actions_are_failed_steps(env: TaskEnv, raw: object, needle: str) -> None:
    env.reset()
    obs, reward, term, trunc, info = env.step(raw)
    assert obs.startswith("[error]") and needle in obs
    assert info["error"] and (reward, term, trunc) == (0.0, False, False)
    assert env.step(Action("run", {"cmd": "echo still here"}))[0] == "still here"


def test_command_that_never_ends_times_out(env: TaskEnv) -> None:
    env.reset()
    obs, info = step(env, "run", cmd="sleep 30")
    assert "[timed out]" in obs and "did not finish" in str(info["error"])


def test_output_is_capped(env: TaskEnv) -> None:
    env.reset()
    obs, _ = step(env, "run", cmd="head -c 100000 /dev/zero | tr '\\0' a")
    assert len(obs.encode()) < env.card.budget.max_output_bytes + 100
    assert "[output truncated]" in obs


def test_step_budget_truncates_and_grades(env: TaskEnv) -> None:
    env.reset()
    for i in range(11):
        step(env, "run", cmd=f"echo {i}")
    _obs, reward, term, trunc, info = env.step(Action("run", {"cmd": "echo hi > out.txt"}))
    assert trunc and not term
    assert info["verdict"].outcome is Outcome.TRUNCATED and reward == 1.0


def test_episode_seconds_budget_truncates() -> None:
    e = TaskEnv(card(budget=Budget(max_steps=50, episode_timeout_s=1.0, command_timeout_s=5)),
                backend=BACKEND)
    try:
        e.reset()
        obs, _r, term, trunc, info = e.step(Action("run", {"cmd": "sleep 3"}))
        assert trunc and not term and "[timed out]" in obs
        assert info["outcome"] == "truncated"
    finally:
        e.close()


def test_transient_fault_fails_first_call_then_works() -> None:
    e = TaskEnv(card(faults=[Fault(kind="transient", target="sort", times=1)]), backend=BACKEND)
    try:
        e.reset()
        first = e.step(Action("run", {"cmd": "sort notes.txt"}))[0]
        assert "temporary failure" in first and "[exit 1]" in first
        assert e.step(Action("run", {"cmd": "sort notes.txt"}))[0] == "alpha\nbeta"
        e.reset()  # reset re-arms the fault
        assert "[exit 1]" in e.step(Action("run", {"cmd": "sort notes.txt"}))[0]
    finally:
        e.close()


def test_missing_tool_fault_removes_it_from_path() -> None:
    e = TaskEnv(card(faults=[Fault(kind="missing_tool", target="sort")]), backend=BACKEND)
    try:
        e.reset()
        assert "[exit 127]" in e.step(Action("run", {"cmd": "sort notes.txt"}))[0]
        assert e.step(Action("run", {"cmd": "head -1 notes.txt"}))[0] == "alpha"
    finally:
        e.close()


def test_permission_fault_denies_access() -> None:
    e = TaskEnv(card(faults=[Fault(kind="permission", target="notes.txt")]), backend=BACKEND)
    try:
        e.reset()
        obs = e.step(Action("read", {"path": "notes.txt"}))[0]
        assert "Permission denied" in obs
        e.step(Action("run", {"cmd": "chmod 644 notes.txt"}))
        assert e.step(Action("read", {"path": "notes.txt"}))[0] == "alpha\nbeta"
    finally:
        e.close()


def test_card_tools_sql_search_and_command() -> None:
    tools = [ToolSpec(name="sql", args={"query": "SQL"}, config={"db": "shop.db",
                                                                  "readonly": False}),
             ToolSpec(name="search", args={"query": "text"}),
             ToolSpec(name="shout", args={"text": "what"},
                      config={"command": "echo \"$ARG_TEXT\" | tr a-z A-Z"})]
    c = card(tools=tools)
    assert set(card_tools(c)) >= {"sql", "search", "shout"}
    e = TaskEnv(c, backend=BACKEND)
    try:
        e.reset()
        e.step(Action("sql", {"query": "create table t(x int, y text)"}))
        e.step(Action("sql", {"query": "insert into t values (1, 'a'), (2, NULL)"}))
        assert e.step(Action("sql", {"query": "select * from t"}))[0] == "x\ty\n1\ta\n2\tNULL"
        bad = e.step(Action("sql", {"query": "selec"}))
        assert "sql error" in bad[0] and "[exit 1]" in bad[0]
        assert e.step(Action("search", {"query": "BETA"}))[0] == "notes.txt:2:beta"
        assert e.step(Action("shout", {"text": "hey"}))[0] == "HEY"
    finally:
        e.close()


def test_action_parse_obj_round_trip() -> None:
    a = Action("write", {"path": "a", "content": "b"})
    assert Action.parse_obj(json.loads(a.to_json())) == a
    assert Action.parse_obj(a.to_json()) == a
    with pytest.raises(ValueError, match="args"):
        Action.parse_obj({"tool": "run", "args": [1]})
