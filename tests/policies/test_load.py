"""Policy specs: every bad spec gets a clear PolicyError."""

from __future__ import annotations

from pathlib import Path

import pytest

from ceiling._errors import PolicyError
from ceiling.policies import Generation, PolicyRequest, SamplingParams, load_policy
from ceiling.policies._scripted import ScriptedPolicy
from ceiling.tools import Action


@pytest.mark.parametrize("spec,msg", [
    ("oracle", "has no kind"),
    ("hff:/x", "did you mean 'hf:'"),
    ("hf:/definitely/not/here", "does not exist"),
    ("openai:model-only", "needs MODEL@URL"),
    ("openai:m@ftp://x", "needs MODEL@URL"),
    ("scripted:oracel", "did you mean 'scripted:oracle'"),
])
def test_bad_specs(spec: str, msg: str) -> None:
    with pytest.raises(PolicyError, match=msg):
        load_policy(spec)


def test_builtin_names_resolve_or_say_why() -> None:
    from ceiling._errors import CeilingError

    with pytest.raises(CeilingError, match="nope"):
        load_policy("builtin:nope")


def test_hf_path_must_be_a_model_folder(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="no config.json"):
        load_policy(f"hf:{tmp_path}")
    (tmp_path / "f").write_text("x")
    with pytest.raises(PolicyError, match="not a folder"):
        load_policy(f"hf:{tmp_path / 'f'}")


def test_hf_missing_adapter(tiny_model: Path, tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="adapter path"):
        load_policy(f"hf:{tiny_model}+{tmp_path / 'nope'}")


class _Plan:
    name = "count"

    def next_action(self, card: object, history: list[tuple[Action, str]]) -> Action:
        if len(history) >= 2:
            return Action("submit")
        if card == "boom":
            raise RuntimeError("plan broke")
        return Action("run", {"cmd": f"echo {len(history)}"})


def test_scripted_renders_through_the_harness_formatter() -> None:
    pol = ScriptedPolicy(lambda seed: _Plan(), "scripted:test")
    ok = PolicyRequest(messages=[], context={"card": "c", "history": [], "episode_id": "e1",
                                             "format_reply": lambda a: f"<{a.tool}>"})
    done = PolicyRequest(messages=[], context={"card": "c", "history": [(None, "")] * 2,
                                               "episode_id": "e2"})
    bad = PolicyRequest(messages=[], context={"card": "boom", "history": [], "episode_id": "e3"})
    out = pol.generate([ok, done, bad], SamplingParams())
    assert out[0] == Generation(text="<run>")
    assert out[1].text == '{"tool": "submit", "args": {}}'
    assert out[2].error is not None and "plan broke" in out[2].error
