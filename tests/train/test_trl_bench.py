"""ceiling's GRPO loss against TRL's ``GRPOTrainer._compute_loss`` on one fixed batch.

The batch has fixed old/reference log-probs and advantages chosen so that the clipped
branch is active on some tokens; the adapter is non-zero. Skipped when TRL is absent.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ceiling.train._trl_bench import (
    bench_prompts,
    crosscheck_trainer,
    loss_crosscheck,
    make_reward,
    trl_available,
)

from .conftest import make_model

pytestmark = pytest.mark.skipif(not trl_available(), reason="trl is not installed")


@pytest.mark.filterwarnings("ignore::FutureWarning")
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_per_token_loss_matches_trl_on_a_fixed_batch(tmp_path: Path, tiny_tok: Any) -> None:
    base = tmp_path / "base"
    make_model(tiny_tok, seed=3, lora=False).save_pretrained(base)
    tiny_tok.save_pretrained(base)
    prompts, _ = bench_prompts(4)
    for beta in (0.04, 0.0):
        trainer, tok = crosscheck_trainer(base, prompts, tmp_path / f"w{beta}", beta=beta)
        r = loss_crosscheck(trainer, tok, prompts, beta=beta, clip=0.2)
        assert r["tokens"] >= 12 and r["tokens_outside_clip_range"] > 0
        assert r["max_abs_per_token_loss"] > 0.05  # the losses compared are not all ~0
        assert r["max_abs_diff_per_token_loss"] < 1e-5
        for agg in ("token", "sequence"):
            assert r["aggregate"][agg]["abs_diff"] < 1e-5


def test_bench_reward_grades_replies() -> None:
    prompts, names = bench_prompts(2)
    assert all(p.endswith("> ") for p in prompts) and names[0]
    reward = make_reward(dict(zip(prompts, names, strict=True)))
    good = f"run: cat {names[0][0]}"
    assert reward(prompts[0], good) >= 1.0
    assert 0.5 <= reward(prompts[0], "run: ls") < 1.0
    assert reward(prompts[0], "zzz") < 0.1
