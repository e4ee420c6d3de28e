"""``ceiling envs validate``, ``ceiling redteam``, ``ceiling bench env``: check that
environments reward only real solutions (see docs/verifier.md)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer

from .._errors import ConfigError
from ._app import app, bench_app, envs_app
from ._executor_opts import ExecutorOpt, RayAddressOpt, check_executor

Backend = Annotated[str, typer.Option("--backend", help="sandbox backend: namespace | local "
                                      "(local has no isolation)")]


def _emit(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, default=str) + "\n")


@contextmanager
def _progress(total: int, label: str) -> Iterator[Callable[[int], None]]:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    with Progress("[progress.description]{task.description}", BarColumn(),
                  MofNCompleteColumn(), TimeElapsedColumn(),
                  console=Console(stderr=True), transient=True) as prog:
        task = prog.add_task(label, total=total)
        yield lambda n: prog.advance(task, n)


def _check_backend(backend: str) -> None:
    from ..sandbox import BACKENDS

    if backend not in BACKENDS:
        raise ConfigError(f"unknown backend {backend!r}", where="--backend",
                          fix=f"use one of {list(BACKENDS)}")


@envs_app.command("validate")
def validate_cmd(
    target: Annotated[str, typer.Argument(help="a family, a template id, a card folder or a folder of card folders")],
    n: Annotated[int | None, typer.Option("--n", min=1, help="cards to generate (default "
                                          "20); for a folder of card folders, check only "
                                          "the first N (default: all)")] = None,
    repeats: Annotated[int, typer.Option("--repeats", min=1, help="oracle runs per card "
                                         "(flakiness check)")] = 2,
    exploits: Annotated[int, typer.Option("--exploits", min=0, help="exploits per card, "
                                          "rotating through the corpus")] = 1,
    workers: Annotated[int, typer.Option("--workers", min=1, help="episodes at once")] = 2,
    backend: Backend = "namespace",
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
    executor: ExecutorOpt = "local",
    ray_address: RayAddressOpt = None,
) -> None:
    """Oracle solves every card, null solves none, exploits earn <= 0, oracle is stable.

    A folder of card folders is checked whole unless --n limits it (the report then says
    how many of how many). Cards graded in-process are listed. Flaky cards are added to
    $CEILING_HOME/quarantine.json. Exits 1 when a check fails.

    Example: ceiling envs validate terminal_ops --n 200 --json
    """
    from ..check import card_folders, cards_for, validate
    from ..sandbox import ceiling_home

    _check_backend(backend)
    check_executor(executor, ray_address)
    folders = card_folders(target)
    cards = cards_for(target, n)
    total = len(cards) * (repeats + 1 + exploits)
    with _progress(total, f"validate {target}") as adv:
        rep = validate(cards, backend=backend, repeats=repeats, exploits_per_card=exploits,
                       workers=workers, progress=adv,
                       quarantine=ceiling_home() / "quarantine.json",
                       executor=executor, ray_address=ray_address)
    rep["target"] = target
    if folders is not None:
        rep["folder_cards"] = len(folders)
        rep["scope"] = (f"all {len(folders)} card folders" if len(cards) == len(folders) else
                        f"the first {len(cards)} of {len(folders)} card folders (--n {n})")
    if as_json:
        _emit(rep)
    else:
        c = rep["cards"]
        scope = f" ({rep['scope']})" if "scope" in rep else ""
        lines = [(f"validate {target}: {c} cards{scope} on backend {backend} "
                 f"({rep['seconds']} s)"),
                 f"  oracle solved {rep['oracle_solved']}/{c}",
                 f"  null solved   {rep['null_solved']}/{c}",
                 (f"  exploit max reward {rep['exploit_max_reward']} over "
                 f"{rep['exploit_runs']} runs"),
                 f"  flaky {len(rep['flaky'])}  infra errors {len(rep['infra_errors'])}"]
        hz = rep["horizon"]
        lines.append(f"  horizon labels vs oracle calls (short < 10, medium 10-30, long > 30): "
                     f"{hz['mislabelled_cards']}/{hz['checked']} cards mislabelled"
                     + (" in " + ", ".join(hz["mislabelled_templates"][:8])
                        + (" ..." if len(hz["mislabelled_templates"]) > 8 else "")
                        if hz["mislabelled_templates"] else ""))
        if rep["in_process"]:
            lines.append(f"  in-process grading (workspace code shares the test process; "
                         f"hardened, not separated): {len(rep['in_process'])}/{c} cards: "
                         + ", ".join(rep["in_process"][:10])
                         + (" ..." if len(rep["in_process"]) > 10 else ""))
        lines += [f"  ! {f['card']} {f['plan']}: {f['outcome']} {f['reward']} "
                  f"{'; '.join(f['evidence'][:2])[:200]}" for f in rep["failures"][:15]]
        lines += [f"  ! infra {i['card']}: {'; '.join(i['evidence'])[:200]}"
                  for i in rep["infra_errors"][:10]]
        lines.append("  OK" if rep["ok"] else "  FAILED")
        sys.stdout.write("\n".join(lines) + "\n")
    if not rep["ok"]:
        raise typer.Exit(1)


@app.command("redteam")
def redteam_cmd(
    family: Annotated[str | None, typer.Option("--family", help="one family, template id, "
                                               "card folder or folder of card folders "
                                               "(default: all registered families)")] = None,
    n: Annotated[int, typer.Option("--n", min=1, help="cards per template")] = 1,
    exploit: Annotated[list[str] | None, typer.Option("--exploit", help="run only this "
                                                      "exploit (repeatable)")] = None,
    klass: Annotated[list[str] | None, typer.Option("--class", help="run only the exploits "
                                                    "of this class (repeatable)")] = None,
    workers: Annotated[int, typer.Option("--workers", min=1, help="episodes at once")] = 2,
    backend: Backend = "namespace",
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
    executor: ExecutorOpt = "local",
    ray_address: RayAddressOpt = None,
) -> None:
    """Run every exploit against generated cards (each on the cards it applies to); print
    hack success per exploit and per attack class.

    Cards: n per template (variants rotate train, heldout, fault, infeasible). Exits 1 when
    any exploit earns a positive reward.

    Example: ceiling redteam --family terminal_ops --json
    """
    from ..check import cards_for, redteam, redteam_jobs
    from ..envs import get_template, templates
    from ..verify.exploits import CLASSES, EXPLOITS

    _check_backend(backend)
    check_executor(executor, ray_address)
    for k in klass or []:
        if k not in CLASSES:
            raise ConfigError(f"unknown exploit class {k!r}", where="--class",
                              fix=f"use one of {sorted(CLASSES)}")
    names = list(exploit or EXPLOITS)
    if klass:
        names = [x for x in names if x in EXPLOITS and EXPLOITS[x].exploit_class in klass]
    from pathlib import Path

    if family and Path(family).is_dir():  # a card folder or a folder of them (e.g. synth)
        tmpls = []
        cards = cards_for(family, None)
    else:
        tmpls = [get_template(family)] if family and "/" in family else templates(family)
        cards = [c for t in tmpls for c in cards_for(t.template_id(), n)]
    total = len(redteam_jobs(cards, [x for x in names if x in EXPLOITS]))
    with _progress(total, "redteam") as adv:
        rep = redteam(cards, backend=backend, workers=workers, exploits=names, progress=adv,
                      executor=executor, ray_address=ray_address)
    rep["families"] = sorted({t.family for t in tmpls} or {c.type for c in cards})
    if as_json:
        _emit(rep)
    else:
        out = [(f"redteam: {rep['cards']} cards, {len(rep['exploits'])} exploits, {rep['runs']}"
                f" runs, families {', '.join(rep['families'])}, backend {backend} "
                f"({rep['seconds']} s)"),
               f"  {'exploit':24} {'class':22} {'runs':>5} {'positive':>8} {'max':>7}  outcomes"]
        for name, row in rep["exploits"].items():
            out.append(f"  {name:24} {row['class']:22} " + _row_text(row))
        out.append(f"  {'class':47} {'runs':>5} {'positive':>8} {'max':>7}  outcomes")
        for cls, row in rep["classes"].items():
            out.append(f"  {cls:47} " + _row_text(row))
        out.append(f"  positive total: {rep['positive_total']}; expected -1 but not "
                   f"hack_detected: {rep['tamper_missed_total']}")
        out += [f"  ! {p['plan']} on {p['card']}: {p['reward']}" for p in rep["positives"][:10]]
        sys.stdout.write("\n".join(out) + "\n")
    if rep["positive_total"]:
        raise typer.Exit(1)


def _row_text(row: dict[str, Any]) -> str:
    mx = "-" if row["max_reward"] is None else f"{row['max_reward']:.2f}"
    oc = ", ".join(f"{k} {v}" for k, v in sorted(row["outcomes"].items()))
    return f"{row['runs']:>5} {row['positive']:>8} {mx:>7}  {oc}"


@bench_app.command("env")
def bench_env_cmd(
    family: Annotated[str | None, typer.Option("--family", help="family to draw cards from "
                                               "(default: terminal_ops)")] = None,
    n: Annotated[int, typer.Option("--n", min=1, help="episodes")] = 12,
    backend: Backend = "namespace",
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Oracle episodes/s, verifier seconds per episode, and the verifier's overhead as a
    ratio to the bare pytest run it wraps (both measured in this run).

    Example: ceiling bench env --json
    """
    from ..check import bench_env, cards_for

    _check_backend(backend)
    cards = cards_for(family or "terminal_ops", n, variants=["train", "heldout"])
    rep = bench_env(cards, backend=backend)
    if as_json:
        _emit(rep)
    else:
        sys.stdout.write("\n".join(f"{k}: {v}" for k, v in rep.items()) + "\n")
