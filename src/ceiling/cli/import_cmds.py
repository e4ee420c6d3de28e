"""``ceiling import harbor PATH --out DIR``: Harbor task folders as ceiling cards."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from ._app import app

import_app = typer.Typer(no_args_is_help=True, help="Import other benchmarks' tasks as cards.")
app.add_typer(import_app, name="import")


@import_app.command("harbor")
def import_harbor_cmd(
    path: Annotated[Path, typer.Argument(help="a Harbor task folder, or a dataset folder of them")],
    out: Annotated[Path, typer.Option("--out", help="folder to write one card folder per task")],
    as_json: Annotated[bool, typer.Option("--json", help="print the JSON report only")] = False,
    build: Annotated[bool, typer.Option("--build/--no-build",
                                        help="build each task's image (root; the package "
                                        "registries); --no-build only checks the mapping")] = True,
    only: Annotated[str | None, typer.Option("--only", help="a glob on task names")] = None,
) -> None:
    """One card per task (instruction, the files the Dockerfile copies, the image its RUN
    steps and package installs build, the tests run as test.sh runs them, solve.sh as the
    oracle, the declared limits); everything else is refused with a reason, counted in the
    report. Then: `ceiling envs validate OUT` and `ceiling eval --suite OUT`.

    Example: ceiling import harbor ~/terminal-bench-2 --out cards/tb2 --json > import.json
    """
    from ..importers import import_harbor

    def progress(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    rep = import_harbor(path, out, build=build, only=only,
                        progress=None if as_json else progress).as_dict()
    if as_json:
        print(json.dumps(rep, indent=2))
        return
    for r in rep["results"]:
        if r.get("card_id"):
            print(f"ok      {r['card_id']}  ->  {r['path']}  ({r.get('layers_built', 0)} layers "
                  f"built, {r['seconds']:.1f} s)")
        else:
            print(f"refused {Path(r['task']).name}: [{r['reason']}] {r['detail'][:300]}")
    print(f"{rep['imported']}/{rep['tasks']} imported; refusals: "
          + (", ".join(f"{k} {v}" for k, v in rep["refusals_by_reason"].items()) or "none"))
