"""``ceiling envs sample``: draw cards from a task mix and report the realised distribution
next to the target weights (see :mod:`ceiling.envs._mix` for the scheme and the checks)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from ._app import envs_app


@envs_app.command("sample")
def sample_cmd(
    mix_path: Annotated[Path, typer.Argument(help="a task_mix.yaml (see examples/task_mix.yaml)",
                                             metavar="TASK_MIX_YAML")],
    n: Annotated[int, typer.Option("--n", help="how many cards to draw")] = 100,
    seed: Annotated[int, typer.Option("--seed", help="seed of the draw, in [0, 2**32)")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON on stdout")] = False,
    draw_only: Annotated[bool, typer.Option(
        "--draw-only", help="report the draws without generating the cards (fast)")] = False,
    out: Annotated[Path | None, typer.Option(
        "--out", help="save every generated card folder under this directory")] = None,
    list_cards: Annotated[bool, typer.Option(
        "--cards", help="include the list of drawn cards in the JSON")] = False,
) -> None:
    """Draw N cards from a task mix; report realised counts and shares by type, horizon,
    template and variant next to the targets, with 4-sigma and chi-square checks.

    Example: ceiling envs sample examples/task_mix.yaml --n 1000 --seed 7 --json
    """
    from ..cards import save_card
    from ..envs import TaskMix, check_seed, distribution_report

    check_seed(seed)
    mix = TaskMix.from_yaml(mix_path)
    draws = mix.draw(n, seed=seed)
    observed: list[tuple[str, str, str, str]] = []
    mismatches: list[dict[str, Any]] = []
    errors: list[dict[str, str]] = []
    cards: list[dict[str, Any]] = []
    if draw_only:
        observed = [(d.type, d.horizon, d.template_id, d.variant) for d in draws]
    else:
        from rich.progress import Progress

        with Progress(transient=True, console=_stderr_console()) as bar:
            task = bar.add_task("making cards", total=len(draws))
            for d in draws:
                try:
                    card = d.make()
                except Exception as e:  # noqa: BLE001 (a generator bug: report it, keep going)
                    errors.append({"template": d.template_id, "difficulty": str(d.difficulty),
                                   "variant": d.variant, "seed": str(d.seed),
                                   "error": f"{type(e).__name__}: {e}"})
                    bar.advance(task)
                    continue
                observed.append((card.type, card.horizon, d.template_id, d.variant))
                if card.horizon != d.horizon:
                    mismatches.append({"card": card.id, "drawn": d.horizon, "made": card.horizon})
                if out is not None:
                    save_card(card, out / card.id.replace("/", "__").replace("@", "__"))
                if list_cards:
                    cards.append({"id": card.id, "type": card.type, "horizon": card.horizon})
                bar.advance(task)
    if list_cards and draw_only:
        cards = [{"template": d.template_id, "difficulty": d.difficulty, "variant": d.variant,
                  "seed": d.seed, "type": d.type, "horizon": d.horizon} for d in draws]
    report = distribution_report(mix, observed) if observed else {}
    result: dict[str, Any] = {
        "mix": str(mix_path), "seed": seed, "n": n, "made_cards": not draw_only,
        "target": {"type": mix.spec.task_mix, "horizon": mix.spec.horizon,
                   "variants": mix.spec.variants},
        "expected": mix.expected_marginals(), "report": report,
        "horizon_mismatches": mismatches, "errors": errors,
    }
    if list_cards:
        result["cards"] = cards
    if as_json:
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
    else:
        _print_human(result)
    if errors or mismatches:
        raise typer.Exit(1)


def _stderr_console() -> Any:
    from rich.console import Console

    return Console(stderr=True)


def _print_human(result: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    con = Console(width=120)
    rep = result["report"]
    for axis in ("type", "horizon", "variant"):
        if not rep:
            break
        table = Table(title=f"{axis} (n={rep['n']})")
        for col in ("", "target", "expected", "realised", "count", "within 4 sd"):
            table.add_column(col, justify="right" if col else "left")
        for k, row in rep[axis]["rows"].items():
            table.add_row(k, f"{row.get('target', row['expected']):.3f}",
                          f"{row['expected']:.3f}", f"{row['share']:.3f}", str(row["count"]),
                          "yes" if row["within_4sd"] else "NO")
        con.print(table)
    if rep:
        chi = rep["chi_square"]
        p = "n/a" if chi["p_value"] is None else f"{chi['p_value']:.3g}"
        con.print(f"chi-square over type x horizon cells: {chi['statistic']:.2f} "
                  f"(dof {chi['dof']}, p = {p}); within sampling error: "
                  f"{rep['within_sampling_error']}; matches targets: {rep['matches_targets']}")
    for m in result["horizon_mismatches"][:10]:
        con.print(f"[red]horizon mismatch[/red] {m['card']}: drawn {m['drawn']}, made {m['made']}")
    for e in result["errors"][:10]:
        con.print(f"[red]generator error[/red] {e['template']} d{e['difficulty']} "
                  f"{e['variant']} seed {e['seed']}: {e['error']}")
