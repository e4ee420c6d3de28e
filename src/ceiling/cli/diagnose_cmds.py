"""``ceiling diagnose``: per family and horizon, post-train or change the base?

Plays the policy on the suite (a stored, named run: ``ceiling report`` shows it too), or
reads a stored run with ``--run``, and prints one verdict per (family, horizon) row with
the figures behind it (``ceiling.evaluate._diagnose``); ``--json`` prints the rows.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from ._app import app


@app.command("diagnose")
def diagnose_cmd(
    policy: Annotated[str | None, typer.Option("--policy", help="policy spec (builtin:tiny, "
                                               "hf:BASE+ADAPTER, scripted:oracle, ...)")] = None,
    suite: Annotated[str | None, typer.Option("--suite", help="a family (terminal_ops), a "
                                              "task-mix .yaml or a card folder")] = None,
    run: Annotated[str | None, typer.Option("--run", help="diagnose a stored run instead "
                                            "(name or id)")] = None,
    k: Annotated[int, typer.Option("-k", help="samples per card (pass@k at this k)")] = 16,
    per_template: Annotated[int, typer.Option(
        "--per-template", help="family suites: seeds per template (each in the train, fault "
                               "and infeasible variants)")] = 1,
    tags: Annotated[list[str] | None, typer.Option("--tags", help="family suites: only "
                                                   "templates with these tags")] = None,
    n: Annotated[int | None, typer.Option("--n", help="at most this many cards")] = None,
    card_seed: Annotated[int, typer.Option("--card-seed")] = 0,
    name: Annotated[str | None, typer.Option("--name", help="store the run under this "
                                             "name")] = None,
    harness: Annotated[str | None, typer.Option("--harness", help="line | json | bash "
                                                "(default: the policy's)")] = None,
    backend: Annotated[str, typer.Option("--backend")] = "namespace",
    workers: Annotated[int, typer.Option("--workers")] = 4,
    seed: Annotated[int, typer.Option("--seed", help="sampling seed")] = 0,
    temperature: Annotated[float | None, typer.Option(
        "--temperature", help="sampling temperature (default 1.0; pass@k needs > 0)")] = None,
    top_p: Annotated[float | None, typer.Option(
        "--top-p", help="nucleus sampling mass (default 1.0, off)")] = None,
    max_new_tokens: Annotated[int | None, typer.Option(
        "--max-new-tokens", help="reply budget in tokens (default: the harness's, 256)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the rows as JSON")] = False,
) -> None:
    """One verdict per family and horizon: post-train / change the base / saturated / not
    measurable, from pass@1 against pass@k (with recovery and boundary awareness beside).

    Example: ceiling diagnose --policy builtin:tiny --suite terminal_ops --tags demo -k 16
    """
    from .._errors import ConfigError
    from ..evaluate import Store, diagnose_rows, diagnosis_cards, format_table, run_eval

    store = Store()
    if run is not None:
        if policy or suite:
            raise ConfigError("--run reads a stored run; it takes no --policy/--suite",
                              where="--run", fix="drop --policy and --suite")
        rec = store.get(run)
        rows = diagnose_rows(store.episodes(rec.id))
    else:
        if not policy or not suite:
            raise ConfigError("diagnose needs --policy and --suite (or --run)",
                              where="--policy", fix="e.g. --policy builtin:tiny --suite "
                                                   "terminal_ops --tags demo")
        if temperature == 0:
            raise ConfigError("greedy sampling gives every sample the same reply, so "
                              "pass@k would equal pass@1", where="--temperature",
                              fix="use a temperature above 0 (default 1.0)")
        if k < 2:
            raise ConfigError(f"-k {k} cannot compare pass@k with pass@1", where="-k",
                              fix="use -k 8 or more")
        from typing import Any

        from ..envs import templates

        cards = None
        if suite in {t.template_id().split("/", 1)[0] for t in templates()}:
            cards = diagnosis_cards(suite, per_template=per_template, tags=tags or (),
                                    card_seed=card_seed, n=n)
        elif tags:
            raise ConfigError("--tags filters family suites only", where="--tags",
                              fix="drop --tags or give a family name")
        kw: dict[str, Any] = {"harness_format": harness} if harness else {}
        kw.update(temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens)
        rec = run_eval(policy, suite, n=None if cards else n, k=k, name=name, seed=seed,
                       card_seed=card_seed, backend=backend, workers=workers, store=store,
                       cards=cards, **kw)
        rows = diagnose_rows(store.episodes(rec.id), k)
        sys.stderr.write(f"run {rec.label} stored ({rec.id}); `ceiling report {rec.id}` "
                         "includes this diagnosis\n")
    if as_json:
        sys.stdout.write(json.dumps(rows, indent=1) + "\n")
    else:
        sys.stdout.write(format_table(rows) + "\n")
