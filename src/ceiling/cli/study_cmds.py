"""``ceiling study CONFIG``: post-training at a ladder of budgets, GRPO against ES.

Progress goes to stderr; ``--json`` prints study.json's headline on stdout.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from ._app import app


@app.command("study")
def study_cmd(
    config: Annotated[str, typer.Argument(help="study YAML (examples/study_tiny.yaml) or a "
                                               "preset name (tiny-test)")],
    out: Annotated[Path | None, typer.Option("--out", help="study folder (default: "
                                             "studies/<config name>); rerun to resume")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the result as JSON")] = False,
) -> None:
    """Train each optimizer at each budget of the ladder for each seed, evaluate every rung
    on held-out cards, fit saturating curves and write report.html. Resumable.

    Example: ceiling study examples/study_tiny.yaml --out studies/tiny
    """
    from ..study import Study, load_study

    cfg = load_study(config)
    folder = out or Path("studies") / Path(config).stem

    def say(msg: str) -> None:
        sys.stderr.write(msg + "\n")
        sys.stderr.flush()

    result = Study(cfg, folder, say=say).run()
    if as_json:
        keep = {k: result[k] for k in ("base", "curves", "fits", "change_at_top",
                                       "grpo_loses_pass_k", "missing", "complete")}
        sys.stdout.write(json.dumps(keep, indent=1) + "\n")
    else:
        ans = result["grpo_loses_pass_k"]
        say(f"does GRPO lose pass@k where ES keeps it? {ans['answer']} ({ans.get('why', '')})")
