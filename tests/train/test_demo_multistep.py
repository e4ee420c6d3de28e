"""``ceiling demo --suite multistep`` on a tiny preset: the multistep cards, the base
pre-trained on chained episodes, real sandboxed GRPO steps, the report; and a clear error
for an unknown suite."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ceiling.basemodel import resolve, weights_sha256
from ceiling.train import DemoConfig, run_demo


@pytest.mark.filterwarnings("ignore::ceiling.sandbox.LocalSandboxWarning")
def test_demo_multistep_tiny_preset(tmp_path: Path) -> None:
    cfg = DemoConfig.for_suite("multistep", out=tmp_path / "demo", per_template=1,
                               heldout_per_template=1, k=2, steps=2, group_size=2,
                               cards_per_step=2, workers=2, minutes=5.0)
    assert cfg.base == "tiny-multistep" and cfg.suite == "multistep"
    res = run_demo(cfg, say=lambda _m: None)
    assert res["suite"]["name"] == "multistep"
    assert res["suite"]["cards"] == 3 and res["suite"]["heldout_cards"] == 3
    assert res["base_sha256"] == weights_sha256(resolve("tiny-multistep"))
    assert not any("CHANGED" in n for n in res["notes"])
    assert res["training"]["steps"] == 2
    for name in ("before.jsonl", "after.jsonl"):
        rows = [json.loads(x) for x in (tmp_path / "demo" / name).read_text().splitlines()]
        assert len(rows) == 6 * 2
        assert all("/multistep-" in r["card_id"] for r in rows)
        # an episode of the tiny base acts (runs commands) before it ends
        assert max(len(r["turns"]) for r in rows) >= 2
    assert {r["template"] for r in res["per_template"]} == {
        "terminal_ops/multistep-two-v1", "terminal_ops/multistep-three-v1",
        "terminal_ops/multistep-four-v1"}
    html = Path(res["report"]).read_text()
    assert "--suite multistep" in html and res["diff"]["value"] is not None


def test_unknown_suite_is_a_clear_error() -> None:
    from ceiling._errors import ConfigError

    with pytest.raises(ConfigError, match="unknown demo suite"):
        DemoConfig.for_suite("multi")
