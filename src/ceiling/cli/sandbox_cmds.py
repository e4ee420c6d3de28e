"""``ceiling bench sandbox``: the sandbox benchmark (JSON on stdout, progress on stderr)."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from .._errors import ConfigError
from ._app import bench_app


@bench_app.command("sandbox")
def bench_sandbox(
    as_json: Annotated[bool, typer.Option("--json", help="print the JSON result only")] = False,
    backend: Annotated[str, typer.Option("--backend", help="namespace or local")] = "namespace",
    reps: Annotated[int, typer.Option("--reps", min=3, help="samples per latency figure")] = 50,
    cycles: Annotated[int, typer.Option("--cycles", min=1,
                                        help="reset cycles before counting leaks")] = 1000,
    sizes: Annotated[str, typer.Option("--sizes", help="workspace sizes in files, "
                                       "comma-separated")] = "100,1000,10000",
    episode_s: Annotated[float, typer.Option("--episode-seconds", min=0.1,
                                             help="seconds per throughput run")] = 3.0,
) -> None:
    """Reset p50/p95 at 100/1,000/10,000 files next to a `cp -a` reset, exec overhead over a
    bare subprocess, checkpoint and fork p50, episodes/s with 1 and 2 workers, and leaked
    mounts/processes/temp dirs after many reset cycles.

    Example: ceiling bench sandbox --json > sandbox-bench.json
    """
    from rich.console import Console

    from ..sandbox import BACKENDS, run_bench

    if backend not in BACKENDS:
        raise ConfigError(f"unknown backend {backend!r}", where="--backend",
                          fix=f"use one of {', '.join(BACKENDS)}")
    try:
        size_list = tuple(int(s) for s in sizes.split(",") if s.strip())
    except ValueError:
        raise ConfigError(f"--sizes must be integers, got {sizes!r}", where="--sizes",
                          fix="e.g. --sizes 100,1000,10000") from None
    if not size_list or min(size_list) < 1:
        raise ConfigError("--sizes needs at least one positive size", where="--sizes",
                          fix="e.g. --sizes 100,1000,10000")
    err = Console(stderr=True)
    with err.status("benchmarking the sandbox") as status:
        result = run_bench(backend=backend, sizes=size_list, reps=reps, cycles=cycles,
                           episode_s=episode_s,
                           progress=lambda s: status.update(f"sandbox bench: {s}"))
    if as_json:
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
        return
    from rich.table import Table

    t = Table(title=f"sandbox bench ({backend})")
    t.add_column("files")
    for c in ("reset p50 ms", "reset p95 ms", "cp -a p50 ms", "cp -a / reset"):
        t.add_column(c, justify="right")
    for n, r in result["reset"].items():
        t.add_row(n, str(r["p50_ms"]), str(r["p95_ms"]), str(r["copy_p50_ms"]),
                  f"{r['copy_over_reset']}x")
    out = Console()
    out.print(t)
    for k in ("exec_overhead_p50_ms", "checkpoint_p50_ms", "fork_p50_ms", "episodes_per_s",
              "leaks", "targets"):
        out.print(f"{k}: {result[k]}")
