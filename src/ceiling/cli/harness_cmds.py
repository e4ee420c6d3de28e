"""``ceiling bench harness``: the share of a model's turns that parse, per harness format."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from .._errors import ConfigError
from ._app import bench_app


@bench_app.command("harness")
def bench_harness_cmd(
    policy: Annotated[str, typer.Option("--policy", help="policy spec, e.g. builtin:smollm2")],
    formats: Annotated[str, typer.Option("--formats", help="comma-separated formats; the "
                                         "first is the baseline")] = "json,bash,line",
    suite: Annotated[str, typer.Option("--suite", help="a family, a task-mix .yaml, a folder "
                                       "of cards, or 'demo' (the demo templates)")] = "demo",
    n: Annotated[int, typer.Option("--n", min=1, help="cards")] = 7,
    k: Annotated[int, typer.Option("-k", min=1, help="samples per card")] = 1,
    turns: Annotated[int, typer.Option("--turns", min=1, help="step budget per episode")] = 4,
    card_seed: Annotated[int, typer.Option("--card-seed", help="first card seed")] = 0,
    temperature: Annotated[float | None, typer.Option("--temperature", help="0 is greedy "
                                                      "(default 1.0)")] = None,
    top_p: Annotated[float | None, typer.Option("--top-p", help="default 1.0")] = None,
    max_new_tokens: Annotated[int, typer.Option("--max-new-tokens", min=1)] = 128,
    few_shot: Annotated[str, typer.Option("--few-shot", help="auto (each format's default), "
                                          "on, off, or both (chat formats with and without "
                                          "the worked example)")] = "auto",
    backend: Annotated[str, typer.Option("--backend", help="namespace | local")] = "namespace",
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
) -> None:
    """Play the same cards under each harness format and report, per format, the share of
    turns that parse (with a Wilson 95% interval), valid actions and solved episodes.

    Example: ceiling bench harness --policy builtin:smollm2 --formats json,bash,line --json
    (add --few-shot both to read the worked example's effect in the same run)
    """
    from ..check import parse_rates
    from ..evaluate import resolve_suite

    fmts = [f.strip() for f in formats.split(",") if f.strip()]
    if suite == "demo":
        from ..train import demo_suite

        cards = demo_suite(max(1, -(-n // 7)), 0)[0][:n]
    else:
        cards = resolve_suite(suite, n, card_seed=card_seed)
    if not cards:
        raise ConfigError(f"suite {suite!r} holds no card", where="--suite")
    rep = parse_rates(policy, cards, fmts, turns=turns, k=k, temperature=temperature,
                      top_p=top_p, max_new_tokens=max_new_tokens, backend=backend,
                      few_shot=few_shot)
    rep["suite"] = suite
    if as_json:
        sys.stdout.write(json.dumps(rep, indent=2) + "\n")
        return
    print(f"harness bench: {policy} on {rep['cards']} {suite} cards x {k}, "
          f"<= {turns} turns each")
    for f, v in rep["formats"].items():
        ci = v["parse_rate_ci"]
        print(f"  {f:<5} parse rate {v['parse_rate']} {ci}  ({v['parsed']}/{v['turns']} "
              f"turns; valid {v['valid_actions']}; solved {v['solved']}/{v['episodes']}; "
              f"x{rep['ratio_to_first'][f]} vs {rep['baseline']}; {v['seconds']} s)")
