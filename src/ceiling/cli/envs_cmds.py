"""``ceiling envs list`` and ``ceiling envs show``: browse the registered templates and the
cards they generate (``envs validate`` lives in ``verify_cmds``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from .._errors import ConfigError
from ._app import envs_app


def _emit(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, default=str) + "\n")


def _template_row(cls: Any) -> dict[str, Any]:
    from ..envs import VARIANTS

    return {"id": cls.template_id(), "family": cls.family, "summary": cls.summary,
            "difficulties": list(cls.difficulties),
            "horizons": {str(d): cls.horizons.get(d, "?") for d in cls.difficulties},
            "variants": list(VARIANTS), "tags": list(cls.tags)}


@envs_app.command("list")
def list_cmd(
    family: Annotated[str | None, typer.Option("--family", help="only this family, e.g. "
                                               "terminal_ops")] = None,
    tag: Annotated[str | None, typer.Option("--tag", help="only templates with this tag, "
                                            "e.g. demo")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """List every registered template: id, type, horizon per difficulty, variants, summary.

    Example: ceiling envs list --family terminal_ops
    """
    from ..envs import templates

    rows = [_template_row(t) for t in templates(family) if tag is None or tag in t.tags]
    if tag is not None and not rows:
        raise ConfigError(f"no template has the tag {tag!r}", where="--tag",
                          fix="run `ceiling envs list` to see the tags")
    if as_json:
        _emit({"templates": rows})
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{len(rows)} templates", show_lines=False)
    for col in ("id", "type", "horizon by difficulty", "variants", "summary"):
        table.add_column(col, overflow="fold")
    for r in rows:
        hz = " ".join(f"{d}:{h}" for d, h in r["horizons"].items())
        table.add_row(r["id"], r["family"], hz, ",".join(r["variants"]), r["summary"])
    Console(width=160).print(table)


def _card_json(card: Any) -> dict[str, Any]:
    data = card.model_dump(mode="json")
    data["workspace_files"] = sorted(card.workspace)
    data["test_files"] = {p: e.data.decode(errors="replace") for p, e in sorted(card.tests.items())}
    data["solution"] = card.solution
    data["content_id"] = card.content_id()
    return data


@envs_app.command("show")
def show_cmd(
    template_id: Annotated[str, typer.Argument(help="a template id, e.g. "
                                               "terminal_ops/log-rotate-v1")],
    seed: Annotated[int, typer.Option("--seed", help="generator seed")] = 0,
    difficulty: Annotated[int | None, typer.Option("--difficulty", "-d",
                                                   help="difficulty (default: the lowest)")] = None,
    variant: Annotated[str, typer.Option("--variant", help="train | heldout | fault | "
                                         "infeasible")] = "train",
    out: Annotated[Path | None, typer.Option("--out", help="also save the card folder "
                                             "(task.yaml, workspace/, tests/, solution.sh) "
                                             "here")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the card as JSON")] = False,
) -> None:
    """Generate one card and print it: instruction, budget, hidden test ids, oracle solution.

    Example: ceiling envs show terminal_ops/log-rotate-v1 --seed 3 -d 2 --variant fault
    """
    from ..cards import save_card
    from ..envs import make

    card = make(template_id, seed=seed, difficulty=difficulty, variant=variant)
    saved = None
    if out is not None:
        if out.exists() and not out.is_dir():
            raise ConfigError(f"{out} exists and is not a folder", where="--out",
                              fix="pass a new or existing folder path")
        saved = save_card(card, out)
    if as_json:
        data = _card_json(card)
        if saved is not None:
            data["saved_to"] = str(saved)
        _emit(data)
        return
    from rich.console import Console
    from rich.markup import escape

    con = Console(width=120, highlight=False)
    con.print(f"[bold]{card.id}[/bold]  ({card.type}, {card.horizon}, difficulty "
              f"{card.difficulty}, split {card.split}, feasible {card.feasible})")
    con.print(f"[bold]instruction[/bold]: {escape(card.instruction)}")
    b = card.budget
    con.print(f"budget: {b.max_steps} steps, {b.command_timeout_s:g} s/command, "
              f"{b.episode_timeout_s:g} s/episode; runner {card.acceptance.runner}")
    if card.faults:
        con.print("faults: " + "; ".join(f"{f.kind} {f.target}" for f in card.faults))
    if not card.feasible:
        con.print(f"infeasible: {card.infeasible_reason}", markup=False)
    if card.acceptance.protected:
        con.print("protected: " + ", ".join(card.acceptance.protected))
    files = sorted(p for p in card.workspace if not p.startswith(".git/"))
    git = " (+ .git)" if any(p.startswith(".git/") for p in card.workspace) else ""
    con.print(f"workspace ({len(files)} files{git}): " + ", ".join(files[:12])
              + (" …" if len(files) > 12 else ""))
    con.print("hidden tests: " + ", ".join(card.acceptance.tests))
    con.print("[bold]oracle solution[/bold]:")
    con.print(card.solution.rstrip(), markup=False)
    if saved is not None:
        con.print(f"saved to {saved}")
