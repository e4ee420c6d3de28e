"""``ceiling bench train``: ceiling's GRPO step against TRL's GRPOTrainer (JSON on stdout,
progress on stderr; :mod:`ceiling.train._trl_bench`), and ``ceiling stages``: each stage's
reward reliability and stage-order warnings (:mod:`ceiling.train._stages`)."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from ._app import app, bench_app
from ._executor_opts import ExecutorOpt, RayAddressOpt, check_executor


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
    threads: Annotated[int | None, typer.Option(
        "--threads", min=1, help="torch intra-op threads for both trainers (default: "
                                 "torch's); 1 repeats best on a shared, busy machine")] = None,
    rounds: Annotated[int, typer.Option(
        "--rounds", min=1, help="(ceiling, TRL) pairs in alternating order; the step times "
                                "are pooled and each round's ratio is reported")] = 1,
) -> None:
    """Seconds per GRPO step and generated tokens/s for ceiling and for TRL's GRPOTrainer
    on the same tiny model, prompts, group size and reward, measured in this run, with the
    ratio; and the largest absolute difference of the per-token GRPO loss on one fixed batch.
    Needs trl (the dev extra).

    On a noisy machine use --rounds 3 or more: the speed of a shared VM drifts by tens of
    percent within a minute, and alternating the order keeps the drift out of the ratio.

    Example: ceiling bench train --json --threads 1 --rounds 3 > train-bench.json
    """
    from rich.console import Console

    from ..train import TrainBenchSettings, run_train_bench

    s = TrainBenchSettings(steps=steps, warmup=warmup, prompts=prompts, group_size=group_size,
                           max_new_tokens=max_new_tokens, base=base, seed=seed,
                           threads=threads, rounds=rounds)
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
    out.print(f"TRL s/step over ceiling s/step: {result['ratio_trl_over_ceiling_s_per_step']} "
              f"(CPU time: {result['ratio_trl_over_ceiling_cpu_s_per_step']})")
    if len(result["rounds"]) > 1:
        out.print("ceiling/TRL per round: " + ", ".join(
            str(r["ceiling_over_trl"]) for r in result["rounds"]))
    lc = result["loss_check"]
    out.print(f"per-token loss, max |ceiling - TRL| over {lc['tokens']} tokens: "
              f"{lc['max_abs_diff_per_token_loss']:.2e}")


@app.command("stages")
def stages_cmd(
    config: Annotated[str, typer.Argument(help="a training config (YAML)")],
    as_json: Annotated[bool, typer.Option("--json", help="print the JSON result only")] = False,
    cards_per_template: Annotated[int, typer.Option("--cards", min=1,
                                                    help="cards per template")] = 1,
    exploits_per_card: Annotated[int, typer.Option("--exploits", min=0,
                                                   help="exploits per card")] = 3,
    backend: Annotated[str, typer.Option("--backend", help="namespace or local")] = "namespace",
    no_cache: Annotated[bool, typer.Option("--no-cache", help="measure again")] = False,
    executor: ExecutorOpt = "local",
    ray_address: RayAddressOpt = None,
) -> None:
    """Measure each stage's reward reliability (oracle solve rate x null fail rate x share
    of exploit runs earning <= 0, on a small sample per template, cached) and warn when a
    less reliable stage is ordered before a more reliable one. Exit 1 on a warning.

    Example: ceiling stages train.yaml --json
    """
    from rich.console import Console

    from ..train import check_stage_order, load_config, stage_reliability

    check_executor(executor, ray_address)
    cfg = load_config(config)
    err = Console(stderr=True)
    rows = []
    with err.status("measuring stage reliability") as status:
        for st in cfg.stages:
            status.update(f"stage {st.name}")
            rows.append(stage_reliability(st, cards_per_template=cards_per_template,
                                          exploits_per_card=exploits_per_card,
                                          backend=backend, cache=not no_cache,
                                          executor=executor, ray_address=ray_address))
    warnings = check_stage_order(cfg.stages, [r.reliability for r in rows])
    result = {"config": config, "stages": [r.as_dict() for r in rows], "warnings": warnings}
    if as_json:
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
    else:
        out = Console()
        for r in rows:
            infra = sum(t.infra_errors for t in r.templates)
            out.print(f"{r.stage}: reliability {r.reliability:.3f} over {len(r.templates)} "
                      f"templates ({r.episodes} episodes, {r.cached} cached"
                      f"{f', {infra} infra errors' if infra else ''})")
            for t in r.templates:
                for p in t.positives:
                    out.print(f"  exploit earned: {p}")
        for w in warnings:
            err.print(f"warning: {w}")
    if warnings:
        raise typer.Exit(1)
