"""``ceiling synth repo|trajectories`` and ``ceiling bench synth``: environment synthesis
into validated card folders (see docs/synthesis.md). Reports print as JSON on stdout with
``--json``; progress (cards, candidates, yield, cards/min) goes to stderr."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer

from .._errors import ConfigError
from ._app import app, bench_app
from ._executor_opts import ExecutorOpt, RayAddressOpt, check_executor

synth_app = typer.Typer(no_args_is_help=True, help="Synthesize validated task cards from "
                        "real repositories or agent trajectories.")
app.add_typer(synth_app, name="synth")

Backend = Annotated[str, typer.Option("--backend", help="sandbox backend: namespace | local "
                                      "(local has no isolation)")]


PolicyOpt = Annotated[str | None, typer.Option("--policy", help="measure each new card's "
                                              "difficulty as this policy's pass rate "
                                              "(e.g. builtin:tiny; see ceiling eval)")]
SamplesOpt = Annotated[int, typer.Option("--samples", "-k", min=1, help="episodes per card "
                                         "for --policy")]


def _measure(rep: dict[str, Any], out: str, policy: str | None, k: int, **kw: Any) -> None:
    """With ``--policy``: the measured difficulty of the folder's cards, into the report."""
    if policy is None:
        return
    from ..synth import measure_difficulty

    sys.stderr.write(f"measuring difficulty: {policy}, {k} episodes per card\n")
    rep["difficulty_measured"] = measure_difficulty(out, policy, k=k, **kw)


def _emit(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, default=str) + "\n")


@contextmanager
def _progress(label: str) -> Iterator[Callable[[dict[str, Any]], None]]:
    """A status line: cards, candidates, yield and cards/min, updated per batch."""
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                  console=Console(stderr=True), transient=True) as prog:
        task = prog.add_task(label, total=None)

        def update(rep: dict[str, Any]) -> None:
            y = rep.get("yield")
            prog.update(task, description=(
                f"{label}: {rep.get('cards', 0)} cards / {rep.get('candidates', 0)} "
                f"candidates, yield {'-' if y is None else f'{y:.0%}'}, "
                f"{rep.get('cards_per_min') or 0} cards/min"))
        yield update


def _check_backend(backend: str) -> None:
    from ..sandbox import BACKENDS

    if backend not in BACKENDS:
        raise ConfigError(f"unknown backend {backend!r}", where="--backend",
                          fix=f"use one of {list(BACKENDS)}")


def _text(rep: dict[str, Any], what: str) -> str:
    lines = [(f"{what}: {rep.get('cards', 0)} cards from {rep.get('candidates', 0)} "
              f"candidates (yield {rep.get('yield')}), {rep.get('cards_per_min')} cards/min, "
              f"{rep.get('seconds')} s -> {rep.get('out')}")]
    for reason, n in (rep.get("refusals") or {}).items():
        lines.append(f"  refused {reason}: {n}")
    if dm := rep.get("difficulty_measured"):
        lines.append(_difficulty_text(dm))
    return "\n".join(lines) + "\n"


def _difficulty_text(dm: dict[str, Any]) -> str:
    hist = ", ".join(f"{k} {v}" for k, v in dm["histogram"].items())
    est = ", ".join(f"{k}: {v['mean_pass_rate']}" for k, v in dm["by_estimate"].items())
    return (f"  difficulty by {dm['policy']} (k={dm['k']}): {dm['rated']} cards rated, mean "
            f"pass rate {dm['mean_pass_rate']}; {hist}; by estimate {est or '-'}")


@synth_app.command("repo")
def synth_repo_cmd(
    source: Annotated[str, typer.Argument(help="a Python project folder, or NAME==VERSION "
                                          "(a PyPI source distribution, fetched with pip)")],
    out: Annotated[str, typer.Option("--out", help="output folder (card folders, "
                                     "manifest.jsonl; resumable)")],
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="stop once the folder "
                                              "holds N validated cards of this project")] = None,
    max_candidates: Annotated[int | None, typer.Option("--max-candidates", min=1,
                                                       help="stop after trying N")] = None,
    split: Annotated[str, typer.Option("--split", help="train | heldout: the split of every "
                                       "card of this project")] = "train",
    combo_share: Annotated[float, typer.Option("--combo-share", min=0.0, max=1.0,
                                               help="share of candidates that combine 2-4 "
                                               "validated bugs")] = 0.25,
    writer: Annotated[str | None, typer.Option("--writer", help="rewrite instructions with "
                                               "openai:MODEL@URL")] = None,
    exploits: Annotated[int, typer.Option("--exploits", min=0, help="exploits per card "
                                          "(rotating through the corpus)")] = 1,
    workers: Annotated[int, typer.Option("--workers", min=1, help="episodes at once")] = 2,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    backend: Backend = "namespace",
    executor: ExecutorOpt = "local",
    ray_address: RayAddressOpt = None,
    policy: PolicyOpt = None,
    samples: SamplesOpt = 4,
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
) -> None:
    """Inject bugs into a real project's covered functions and keep the ones its own tests
    catch, validated (oracle passes, untouched fails, exploits earn nothing).

    Example: ceiling synth repo toolz==0.12.1 --out cards/toolz --limit 50 --json
    """
    from ..synth import RepoOptions, synth_repo

    _check_backend(backend)
    check_executor(executor, ray_address)
    opts = RepoOptions(limit=limit, seed=seed, backend=backend, workers=workers, split=split,
                       combo_share=combo_share, max_candidates=max_candidates, writer=writer,
                       exploits=exploits, executor=executor, ray_address=ray_address)
    with _progress(f"synth {source}") as update:
        rep = synth_repo(source, out, opts, progress=update)
    _measure(rep, out, policy, samples, backend=backend, workers=workers, executor=executor,
             ray_address=ray_address)
    _emit(rep) if as_json else sys.stdout.write(_text(rep, f"synth repo {source}"))


@synth_app.command("trajectories")
def synth_trajectories_cmd(
    file: Annotated[str, typer.Argument(help="trajectories: ceiling's JSONL (what "
                                        "`ceiling eval --name N` writes to $CEILING_HOME/runs/"
                                        "name-N/trajectories.jsonl) or the generic JSONL "
                                        "(docs/synthesis.md)")],
    out: Annotated[str, typer.Option("--out", help="output folder (resumable)")],
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="stop after N cards")] = None,
    depth: Annotated[int, typer.Option("--depth", min=0, help="also chain up to N "
                                       "trajectories on one workspace into multi-round "
                                       "cards")] = 0,
    breadth: Annotated[int, typer.Option("--breadth", min=0, help="also combine up to N "
                                         "pairs of workspaces into one card")] = 0,
    exploits: Annotated[int, typer.Option("--exploits", min=0, help="exploits per card")] = 1,
    workers: Annotated[int, typer.Option("--workers", min=1, help="episodes at once")] = 2,
    backend: Backend = "namespace",
    executor: ExecutorOpt = "local",
    ray_address: RayAddressOpt = None,
    policy: PolicyOpt = None,
    samples: SamplesOpt = 4,
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
) -> None:
    """Recover the initial workspace of each trajectory by replaying its file operations
    backwards; tests from its end state; the oracle replays its actions; validated.

    Example: ceiling synth trajectories runs/oracle.jsonl --out cards/traj --json
    """
    from ..synth import TrajOptions, synth_trajectories

    _check_backend(backend)
    check_executor(executor, ray_address)
    opts = TrajOptions(limit=limit, backend=backend, workers=workers, exploits=exploits,
                       depth=depth, breadth=breadth, executor=executor,
                       ray_address=ray_address)
    with _progress(f"synth {file}") as update:
        rep = synth_trajectories(file, out, opts, progress=update)
    _measure(rep, out, policy, samples, backend=backend, workers=workers, executor=executor,
             ray_address=ray_address)
    _emit(rep) if as_json else sys.stdout.write(_text(rep, f"synth trajectories {file}"))


@synth_app.command("difficulty")
def synth_difficulty_cmd(
    out: Annotated[str, typer.Argument(help="a synth output folder (its manifest.jsonl)")],
    policy: Annotated[str, typer.Option("--policy", help="the policy whose pass rate is the "
                                        "measured difficulty (e.g. builtin:tiny)")],
    samples: SamplesOpt = 4,
    workers: Annotated[int, typer.Option("--workers", min=1, help="episodes at once")] = 2,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    backend: Backend = "namespace",
    executor: ExecutorOpt = "local",
    ray_address: RayAddressOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the summary as JSON")] = False,
) -> None:
    """Measure each card's difficulty as a policy's pass rate over k episodes, into
    DIR/difficulty.jsonl (cards already measured for this policy and k are skipped).

    Example: ceiling synth difficulty cards/toolz --policy builtin:tiny -k 4 --json
    """
    from pathlib import Path

    from ..synth import measure_difficulty

    _check_backend(backend)
    check_executor(executor, ray_address)
    if not (Path(out) / "manifest.jsonl").is_file():
        raise ConfigError(f"{out} has no manifest.jsonl", where="OUT",
                          fix="give a folder written by ceiling synth repo|trajectories")
    dm = measure_difficulty(out, policy, k=samples, backend=backend, workers=workers,
                            seed=seed, executor=executor, ray_address=ray_address)
    _emit(dm) if as_json else sys.stdout.write(_difficulty_text(dm).strip() + "\n")


@bench_app.command("synth")
def bench_synth_cmd(
    out: Annotated[str, typer.Option("--out", help="output folder (resumable)")] =
    "ceiling-synth-bench",
    projects: Annotated[str | None, typer.Option("--projects", help="comma-separated "
                                                 "NAME==VERSION list (default: 12 pinned "
                                                 "pure-Python projects)")] = None,
    per_project: Annotated[int, typer.Option("--per-project", min=1)] = 100,
    minutes: Annotated[float, typer.Option("--minutes", min=0.1, help="time budget")] = 60.0,
    workers: Annotated[int, typer.Option("--workers", min=1)] = 2,
    backend: Backend = "namespace",
    as_json: Annotated[bool, typer.Option("--json", help="print the JSON result only")] = False,
) -> None:
    """Cards from several real PyPI projects: yield per project and per modifier, cards/min,
    and the cost of a card against one run of the project's suite (same run).

    Example: ceiling bench synth --per-project 125 --minutes 240 --json
    """
    from ..synth import DEFAULT_PROJECTS, bench_synth

    _check_backend(backend)
    specs = [s.strip() for s in projects.split(",") if s.strip()] if projects else list(
        DEFAULT_PROJECTS)
    t0 = time.perf_counter()

    def tick(spec: str, rep: dict[str, Any]) -> None:
        sys.stderr.write(f"[{time.perf_counter() - t0:7.0f} s] {spec}: {rep.get('cards')} "
                         f"cards / {rep.get('candidates')} candidates, yield "
                         f"{rep.get('yield')}, {rep.get('cards_per_min')} cards/min\n")

    rep = bench_synth(out, projects=specs, per_project=per_project, minutes=minutes,
                      workers=workers, backend=backend, progress=tick)
    _emit(rep) if as_json else sys.stdout.write(_text(rep, "bench synth"))
