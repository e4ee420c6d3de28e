"""The floor helpers every package shares: load_yaml, first_error, ceiling_home."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError

from ceiling import CardError, ConfigError, load_card
from ceiling._home import ceiling_home
from ceiling._yaml import first_error, load_yaml
from ceiling.envs import TaskMix
from ceiling.train import load_config


class Inner(BaseModel):
    model_config = ConfigDict(extra="forbid")
    steps: int = 1


class Outer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    stages: list[Inner] = []


def test_load_yaml_names_the_line_of_a_syntax_error(tmp_path: Path) -> None:
    p = tmp_path / "x.yaml"
    p.write_text("a: 1\nb: [2\nc: 3\n")
    with pytest.raises(ConfigError) as e:
        load_yaml(p)
    assert e.value.where is not None and e.value.where.startswith(f"{p}:")
    with pytest.raises(CardError, match="no such file"):
        load_yaml(tmp_path / "none.yaml", error=CardError)


@pytest.mark.parametrize("read", [load_config, TaskMix.from_yaml,
                                  lambda p: load_card(p.parent)])
def test_every_yaml_reader_keeps_the_line_number(tmp_path: Path, read: object) -> None:
    p = tmp_path / "task.yaml"
    p.write_text("id: x\nfoo: [1\n")
    with pytest.raises((ConfigError, CardError)) as e:
        read(p)  # type: ignore[operator]
    assert e.value.where == f"{p}:3", e.value  # type: ignore[union-attr]


def test_first_error_suggests_the_key_of_the_nested_model() -> None:
    with pytest.raises(ValidationError) as e:
        Outer.model_validate({"stages": [{"stepz": 2}]})
    kind, loc, hint, _ = first_error(e.value, Outer)
    assert (kind, loc, hint) == ("extra_forbidden", "stages.0.stepz", "steps")


def test_ceiling_home_follows_the_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CEILING_HOME", str(tmp_path))
    assert ceiling_home() == tmp_path
    monkeypatch.delenv("CEILING_HOME")
    assert ceiling_home() == Path.home() / ".ceiling"
