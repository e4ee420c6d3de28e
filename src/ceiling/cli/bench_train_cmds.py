"""``ceiling bench train``: ceiling's GRPO step against TRL's GRPOTrainer (JSON on stdout,
progress on stderr). See :mod:`ceiling.train._trl_bench`."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from ._app import bench_app


@bench_app.command("train")
def bench_train(
    as_json: Annotated[bool, typer.Option("--json", help="print the JSON result only")] = False,
    steps: Annotated[int, typer.Option("--steps", min=1, help="timed steps per trainer")] = 4,
    warmup: Annotated[int, typer.Option("--warmup", min=0, help="untimed steps first")] = 1,
    prompts: Annotated[int, typer.Option("--prompts", min=1, help="prompts per step")] = 4,
    group_size: Annotated[int, typer.Option("--group-size", min=2,
                                            help="samples per prompt")] = 8,
    max_new_tokens: Annotated[int, typer.Option("--max-new-tokens", min=1,
                                                help="completion budget")] = 24,
    base: Annotated[str, typer.Option("--base", help="auto (builtin:tiny if present, else a "
                                      "random tiny Llama), builtin:tiny, or hf:PATH")] = "auto",
    seed: Annotated[int, typer.Option("--seed")] = 0,
) -> None:
    """Seconds per GRPO step and generated tokens/s for ceiling and for TRL's GRPOTrainer
    on the same tiny model, prompts, group size and reward, measured in this run, with the
    ratio; and the largest absolute difference of the per-token GRPO loss on one fixed batch.
    Needs trl (the dev extra).

    Example: ceiling bench train --json > train-bench.json
    """
    from rich.console import Console

    from ..train._trl_bench import TrainBenchSettings, run_train_bench

    s = TrainBenchSettings(steps=steps, warmup=warmup, prompts=prompts, group_size=group_size,
                           max_new_tokens=max_new_tokens, base=base, seed=seed)
    err = Console(stderr=True)
    with err.status("benchmarking training") as status:
        result = run_train_bench(s, progress=lambda m: status.update(f"train bench: {m}"))
    if as_json:
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
        return
    out = Console()
    c, t = result["ceiling"], result["trl"]
    out.print(f"base: {result['base']}  (torch threads {result['torch_threads']}, "
              f"trl {result['trl_version']})")
    out.print(f"ceiling: {c['s_per_step']} s/step, {c['tokens_per_s']} tokens/s")
    out.print(f"TRL:     {t['s_per_step']} s/step, {t['tokens_per_s']} tokens/s")
    out.print(f"TRL s/step over ceiling s/step: {result['ratio_trl_over_ceiling_s_per_step']}")
    lc = result["loss_check"]
    out.print(f"per-token loss, max |ceiling - TRL| over {lc['tokens']} tokens: "
              f"{lc['max_abs_diff_per_token_loss']:.2e}")
