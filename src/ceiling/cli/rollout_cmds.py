"""``ceiling serve`` (an OpenAI-compatible server for a local model) and
``ceiling bench rollout`` (where a rollout's time goes)."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from .._errors import ConfigError
from ._app import app, bench_app


@app.command("serve")
def serve_cmd(
    model: Annotated[str, typer.Option("--model", help="a local HF model folder, or "
                                       "builtin:tiny / builtin:smollm2")],
    adapter: Annotated[str | None, typer.Option("--adapter", help="a PEFT adapter folder "
                                                "applied on top of the model")] = None,
    host: Annotated[str, typer.Option("--host", help="address to bind (loopback by "
                                      "default; there is no authentication)")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535)] = 8000,
    name: Annotated[str | None, typer.Option("--name", help="the model id clients send "
                                             "(default: the folder name)")] = None,
    device: Annotated[str | None, typer.Option("--device", help="cpu | cuda (default: "
                                               "cuda when available)")] = None,
) -> None:
    """Serve a local model at /v1/chat/completions (OpenAI-compatible, micro-batched).

    Example: ceiling serve --model ./my-model --adapter ./ckpt/adapter --port 8000
    then:    ceiling eval --policy openai:my-model@http://127.0.0.1:8000/v1 --suite terminal_ops
    """
    from ..policies import default_model_name, serve

    print(f"serving {default_model_name(model, adapter) if name is None else name} on "
          f"http://{host}:{port}/v1 (Ctrl-C to stop)", file=sys.stderr)
    serve(model, adapter, host=host, port=port, model_name=name, device=device)


@bench_app.command("rollout")
def bench_rollout_cmd(
    cards: Annotated[int, typer.Option("--cards", min=1, help="episodes per concurrency "
                                       "level (small terminal_ops cards)")] = 16,
    levels: Annotated[str, typer.Option("--concurrency", help="comma-separated live-episode "
                                        "counts to measure")] = "1,4,16",
    backend: Annotated[str, typer.Option("--backend", help="namespace | local")] = "namespace",
    fmt: Annotated[str, typer.Option("--format", help="harness format: line | json")] = "line",
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
    ray: Annotated[bool, typer.Option("--ray/--no-ray", help="also run the cards on the "
                                      "Ray executor over a 1- then 2-node cluster started "
                                      "here, next to the local executor")] = True,
    ray_concurrency: Annotated[int, typer.Option("--ray-concurrency", min=1,
                                                 help="live episodes for the executor "
                                                      "scaling rows")] = 4,
) -> None:
    """Harness and environment overhead per step, episodes/s at 1, 4 and 16 concurrent
    episodes, and the share of wall time outside the policy (scripted oracle policy).
    With --ray (default): the Ray executor's per-episode overhead over the local one and
    its 1 -> 2 node scaling, all in the same run.

    Example: ceiling bench rollout --json
    """
    from ..rollout import run_bench
    from ..sandbox import BACKENDS

    if backend not in BACKENDS:
        raise ConfigError(f"unknown backend {backend!r}", where="--backend",
                          fix=f"use one of {list(BACKENDS)}")
    if fmt not in ("line", "json"):
        raise ConfigError(f"unknown harness format {fmt!r}", where="--format",
                          fix="use line or json")
    try:
        lv = [int(x) for x in levels.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"--concurrency {levels!r} is not a list of integers",
                          where="--concurrency", fix="write e.g. 1,4,16") from None
    if not lv or min(lv) < 1:
        raise ConfigError("--concurrency needs positive integers", where="--concurrency",
                          fix="write e.g. 1,4,16")
    rep = run_bench(n_cards=cards, levels=lv, backend=backend, fmt=fmt, progress=not as_json,
                    ray=ray, ray_concurrency=ray_concurrency)
    if as_json:
        sys.stdout.write(json.dumps(rep, indent=2) + "\n")
        return
    ps = rep["per_step"]
    print(f"rollout bench ({rep['policy']}, {fmt} harness, {backend} sandbox, "
          f"{cards} cards)")
    print(f"  harness per step {ps['harness_ms']} ms  (bare exec {ps['bare_exec_ms']} ms, "
          f"ratio {ps['harness_vs_bare_exec']})")
    print(f"  env step {ps['env_step_ms']} ms   verify per episode "
          f"{rep['verify_ms_per_episode']} ms")
    for k, v in rep["concurrency"].items():
        print(f"  concurrency {k:>3}: {v['episodes_per_s']} ep/s (x{v['speedup_vs_1']}), "
              f"outside policy {v['outside_policy_share']}")
    ex = rep.get("executors")
    if ex:
        sc = ex["scaling_1_to_2_nodes"]
        print(f"  ray overhead {ex['ray_overhead_ms_per_episode']} ms/episode (target <= "
              f"{ex['overhead_target_ms']:g}); 1 -> 2 nodes {sc['episodes_per_s_1']} -> "
              f"{sc['episodes_per_s_2']} ep/s (efficiency {sc['efficiency']}); same "
              f"outcomes as local: {ex['same_outcomes_and_rewards']}")
