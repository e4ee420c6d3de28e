"""``ceiling bench harness``'s counting: per format (and with/without the worked example)."""

from __future__ import annotations

from typing import Any

import pytest

from ceiling._errors import ConfigError
from ceiling.check import parse_rates


def _demo_cards() -> list[Any]:
    from ceiling.train import demo_suite

    return demo_suite(1, 0)[0][:2]


def test_both_plays_each_chat_format_with_and_without_the_example() -> None:
    rep = parse_rates("scripted:oracle", _demo_cards(), ["bash", "line"], turns=4,
                      few_shot="both", workers=1)
    assert list(rep["formats"]) == ["bash", "bash+example", "line"]
    f = rep["formats"]
    assert (f["bash"]["few_shot"], f["bash+example"]["few_shot"], f["line"]["few_shot"]) == \
        (False, True, False)
    for v in f.values():  # the oracle writes every reply in the format asked for
        assert v["parse_rate"] == 1.0 and v["solved"] == v["episodes"] == 2
        assert v["turns"] == v["parsed"] == v["valid_actions"] >= 4
    assert rep["baseline"] == "bash" and rep["ratio_to_first"]["bash+example"] == 1.0


def test_an_unknown_few_shot_setting_names_the_flag() -> None:
    with pytest.raises(ConfigError, match="--few-shot"):
        parse_rates("scripted:oracle", _demo_cards(), ["bash"], few_shot="sometimes")
