"""``ceiling train``, ``ceiling demo``, ``ceiling base build``, ``ceiling verify-base``.

Progress goes to stderr (rich); ``--json`` prints one JSON object on stdout.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from ._app import app, base_app


def _err(msg: str) -> None:
    sys.stderr.write(msg + "\n")


def _progress_cb(total: int) -> tuple[Any, Any]:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    prog = Progress(TextColumn("[bold]train"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("{task.fields[info]}"), TimeElapsedColumn(),
                    console=Console(stderr=True), transient=False)
    task = prog.add_task("train", total=total, info="")

    def on_step(info: Any) -> None:
        m = info.metrics
        prog.update(task, completed=info.step, info=(
            f"reward {m.get('reward_mean', 0):.2f} pass {m.get('pass_rate', 0):.2f} "
            f"kl {m.get('kl', 0):.4f} tok/s {m.get('tokens_per_s', 0):.0f} "
            f"rollouts {info.unit['rollouts']}"))

    return prog, on_step


@app.command("train")
def train_cmd(
    config: Annotated[Path, typer.Argument(help="training config YAML (see docs/training.md)")],
    out: Annotated[Path | None, typer.Option("--out", help="run folder (default: "
                                             "runs/<config name>)")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="continue from the run folder's "
                                         "latest checkpoint")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the summary as JSON")] = False,
    check_order: Annotated[bool, typer.Option(
        "--check-order/--no-check-order",
        help="with several stages, measure each stage's reward reliability first (cached per "
             "template) and warn when a less reliable stage comes before a more reliable "
             "one")] = True,
    harness: Annotated[str | None, typer.Option(
        "--harness", help="override harness_format: bash | json | line")] = None,
    temperature: Annotated[float | None, typer.Option(
        "--temperature", help="override sampling.temperature (0 = greedy; ES only)")] = None,
    top_p: Annotated[float | None, typer.Option(
        "--top-p", help="override sampling.top_p (< 1 for ES only)")] = None,
    max_new_tokens: Annotated[int | None, typer.Option(
        "--max-new-tokens", help="override sampling.max_new_tokens")] = None,
    executor: Annotated[str | None, typer.Option(
        "--executor", help="override executor: local | ray (where environment steps "
                           "run; docs/scale-out.md)")] = None,
    ray_address: Annotated[str | None, typer.Option(
        "--ray-address", envvar="CEILING_RAY_ADDRESS",
        help="override ray_address: auto | HOST:PORT")] = None,
) -> None:
    """Post-train a LoRA adapter on a frozen base (GRPO or ES), stage by stage.

    Exits 3 when the red-team alarm (``redteam_alarm.action: stop``) ended the run early.

    Example: ceiling train examples/train_demo.yaml --out runs/demo
    """
    from dataclasses import asdict

    from ..train import Trainer, load_config

    cfg = load_config(config)
    over = {k: v for k, v in (("temperature", temperature), ("top_p", top_p),
                              ("max_new_tokens", max_new_tokens)) if v is not None}
    if over or harness is not None or executor is not None or ray_address is not None:
        from ..train import config_from_dict

        data = cfg.model_dump(mode="json")
        data["sampling"] = {**data["sampling"], **over}
        if harness is not None:
            data["harness_format"] = harness
        if executor is not None:
            data["executor"] = executor
        if ray_address is not None:
            data["ray_address"] = ray_address
        cfg = config_from_dict(data, where=f"{config} (with command-line overrides)")
    if cfg.executor == "ray":
        from ._executor_opts import check_executor

        check_executor(cfg.executor, cfg.ray_address)
    run_dir = out or Path("runs") / config.stem
    if check_order and len(cfg.stages) > 1 and not resume:
        from ..train import check_stage_order

        _err(f"measuring the reward reliability of {len(cfg.stages)} stages ...")
        for w in check_stage_order(cfg.stages, backend=cfg.backend, executor=cfg.executor,
                                   ray_address=cfg.ray_address):
            _err(f"warning: {w}")
    prog, on_step = _progress_cb(cfg.total_steps)
    with prog:
        summary = Trainer(cfg, run_dir, on_step=on_step).run(resume=resume)
    for n in summary.notes:
        _err(f"note: {n}")
    if as_json:
        sys.stdout.write(json.dumps(asdict(summary), indent=2) + "\n")
    else:
        _err(f"done: {summary.steps} steps, {summary.unit['rollouts']} rollouts; checkpoint "
             f"{summary.checkpoint}")
    if summary.stopped_by_alarm:
        _err(f"stopped by the red-team alarm: {summary.stopped_by_alarm} (resume with "
             "--resume after fixing the environment or raising redteam_alarm.max_hack_share)")
        raise typer.Exit(3)


@app.command("demo")
def demo_cmd(
    base: Annotated[str | None, typer.Option(
        "--base", help="tiny, tiny-multistep or smollm2 (default: the suite's base)")] = None,
    suite: Annotated[str, typer.Option(
        "--suite", help="demo (one-command tasks, base tiny) or multistep (2-4 chained "
                        "commands, base tiny-multistep)")] = "demo",
    out: Annotated[Path, typer.Option("--out", help="output folder")] = Path("ceiling-demo"),
    minutes: Annotated[float | None, typer.Option(
        "--minutes", help="training time budget in minutes (evaluation comes on top)")] = None,
    backend: Annotated[str, typer.Option("--backend", help="namespace (falls back to local "
                                         "when unavailable) or local")] = "namespace",
    seed: Annotated[int, typer.Option("--seed")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="print demo.json on stdout")] = False,
    harness: Annotated[str | None, typer.Option(
        "--harness", help="bash | json | line (default: bash for smollm2, line for tiny)")
    ] = None,
    temperature: Annotated[float | None, typer.Option(
        "--temperature", help="sampling temperature of the evaluations and of training "
                              "(default 1.0, smollm2 0.3; 0 = greedy evaluations, training stays "
                              "at 1.0)")
    ] = None,
    top_p: Annotated[float | None, typer.Option(
        "--top-p", help="nucleus sampling of the evaluations (training keeps 1.0)")] = None,
    max_new_tokens: Annotated[int | None, typer.Option(
        "--max-new-tokens", help="reply budget in tokens (default: the base's)")] = None,
) -> None:
    """Evaluate the built-in base, post-train it with GRPO in sandboxed episodes, evaluate
    again, and write an HTML report.

    Example: ceiling demo --out /tmp/demo   (or --suite multistep)
    """
    from ..train import DemoConfig, run_demo

    kw: dict[str, Any] = {"out": out, "backend": backend, "seed": seed}
    for key, val in (("minutes", minutes), ("harness", harness), ("temperature", temperature),
                     ("top_p", top_p), ("max_new_tokens", max_new_tokens)):
        if val is not None:
            kw[key] = val
    cfg = DemoConfig.for_suite(suite, base, **kw)
    prog, on_step = _progress_cb(cfg.steps)
    with prog:
        res = run_demo(cfg, say=lambda s: prog.console.print(s), on_step=on_step)
    d = res["diff"]
    k = res["suite"]["k"]

    def f(v: float | None) -> str:
        return "n/a" if v is None else f"{v:.3f}"

    ci = d["ci"] or [None, None]
    _err(f"held-out pass@1 {f(res['before']['pass@1'])} -> {f(res['after']['pass@1'])} "
         f"(change {f(d['value'])}, 95% CI [{f(ci[0])}, {f(ci[1])}]"
         f"{'' if d['excludes_zero'] else ', includes zero'}); pass@{k} "
         f"{f(res['before'][f'pass@{k}'])} -> {f(res['after'][f'pass@{k}'])}")
    for n in res["notes"]:
        _err(f"note: {n}")
    _err(f"report: {res['report']}")
    if as_json:
        sys.stdout.write(json.dumps(res, indent=2) + "\n")


@base_app.command("build")
def base_build_cmd(
    out: Annotated[Path, typer.Option("--out", help="output model folder")] = Path("tiny-base"),
    steps: Annotated[int | None, typer.Option("--steps", help="optimizer steps")] = None,
    minutes: Annotated[float | None, typer.Option("--minutes", help="wall-time cap (a capped "
                                                  "build says so in build.json)")] = None,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    action_steps: Annotated[int | None, typer.Option(
        "--action-steps", help="phase-2 steps (loss on action lines only)")] = None,
    init: Annotated[Path | None, typer.Option(
        "--init", help="continue from an earlier build's folder (skips phase 1)")] = None,
    threads: Annotated[int, typer.Option("--threads", help="torch threads (results are "
                                         "bit-identical only for the same count)")] = 1,
    corpus: Annotated[str, typer.Option("--corpus", help="demo (builtin:tiny) or multistep "
                                        "(builtin:tiny-multistep: chains of 2-4 demo "
                                        "operations)")] = "demo",
    block: Annotated[int | None, typer.Option("--block", help="tokens per packed block "
                                              "(default 128; 192 for multistep)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the build report as JSON")
                       ] = False,
) -> None:
    """Pre-train builtin:tiny from its built-in corpus. The shipped fixture is these two
    runs (see its build.json and docs/training.md):

    ceiling base build --steps 150 --action-steps 600 --threads 1 --out tiny-a

    ceiling base build --init tiny-a --action-steps 1200 --threads 2 --out tiny-base

    builtin:tiny-multistep continues builtin:tiny on the multistep corpus (see its build.json):

    ceiling base build --corpus multistep --init TINY --action-steps 700 --threads 2
    --out tiny-multistep
    """
    from dataclasses import asdict

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ..basemodel.build import BuildConfig, build_tiny

    kw: dict[str, Any] = {"seed": seed, "threads": threads, "corpus": corpus}
    if block is not None or corpus == "multistep":
        kw["block"] = block or 192
    if steps is not None:
        kw["steps"] = steps
    if minutes is not None:
        kw["max_minutes"] = minutes
    if action_steps is not None:
        kw["action_steps"] = action_steps
    if init is not None:
        kw["init"] = str(init)
    cfg = BuildConfig(**kw)
    prog = Progress(TextColumn("[bold]pretrain"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("loss {task.fields[loss]}"), TimeElapsedColumn(),
                    console=Console(stderr=True))
    task = prog.add_task("pretrain", total=(0 if cfg.init else cfg.steps) + cfg.action_steps,
                         loss="-")
    with prog:
        rep = build_tiny(out, cfg, progress=lambda s, n, loss: prog.update(
            task, completed=s, loss=f"{loss:.3f}"))
    e = rep.eval
    anyk = e[f"any_of_{e['samples']}_exact"]
    _err(f"built {out}: {rep.params:,} params, {rep.steps_done} steps in {rep.seconds:.0f} s "
         f"({rep.tokens_per_s:,.0f} tok/s){' (capped by --minutes)' if rep.capped else ''}; "
         f"held-out corpus exact: greedy {e['greedy_exact']}, sampled {e['sampled_exact']}, "
         f"any of {e['samples']} {anyk}")
    if as_json:
        sys.stdout.write(json.dumps(asdict(rep), indent=2) + "\n")


@app.command("verify-base")
def verify_base_cmd(
    ckpt: Annotated[Path, typer.Argument(help="a checkpoint folder (or a run folder: its "
                                         "latest checkpoint)")],
    base: Annotated[str, typer.Argument(help="the base: a model folder, hf:PATH or "
                                        "builtin:tiny")],
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Check that a checkpoint was trained on exactly these base weights (SHA-256).
    Exits 1 when they differ.

    Example: ceiling verify-base runs/demo/checkpoints/step-000040 builtin:tiny
    """
    from ..train import base_path, verify_base

    res = verify_base(ckpt, base_path(base))
    if as_json:
        sys.stdout.write(json.dumps(res, indent=2) + "\n")
    else:
        word = "matches" if res["match"] else "DOES NOT match"
        _err(f"{res['checkpoint']}: base {res['actual']} {word} the recorded "
             f"{res['recorded']}")
    if not res["match"]:
        raise typer.Exit(1)
