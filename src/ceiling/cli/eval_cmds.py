"""``ceiling eval``, ``compare``, ``gate``, ``report``, ``view``: evaluate, store, compare,
gate and show runs (see docs/evaluation.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from ._app import app
from ._executor_opts import ExecutorOpt, RayAddressOpt, check_executor


def _print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n")


def _r(m: dict[str, Any] | None) -> str:
    if not m or m.get("value") is None:
        return "n/a"
    ci = m.get("ci")
    return f"{m['value']:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


def _print_summary(s: dict[str, Any]) -> None:
    lines = [
        f"run {s.get('name') or s['run_id']} (id {s['run_id']}, key {s['key']})",
        (f"  policy {s['policy']}  suite {s['suite']}  cards {s['cards']}  episodes "
        f"{s['episodes']}  k {s['k']}"),
        f"  pass@1 {_r(s['pass@1'])}"
        + (f"   pass@{s['k']} {_r(s['pass@k'])}" if s["k"] > 1 else ""),
        "  outcomes " + ", ".join(f"{k} {v}" for k, v in s["outcomes"].items() if v),
        "  by horizon " + ", ".join(f"{k} {_r(v)}" for k, v in s["by_horizon"].items()),
        "  by type " + ", ".join(f"{k} {_r(v)}" for k, v in s["by_type"].items()),
        (f"  recovery {_r(s['recovery'])}   correct give-up "
        f"{_r(s['boundary']['correct_giveup'])}   wrong give-up "
        f"{_r(s['boundary']['wrong_giveup'])}"),
        f"  held-out gap {_r(s['heldout_gap'])}",
        (f"  per episode: steps {_r(s['per_episode']['steps'])}, tokens "
        f"{_r(s['per_episode']['tokens'])}, seconds {_r(s['per_episode']['seconds'])}"),
        f"  intervals: 95% {s['bootstrap']['method']}, {s['bootstrap']['resamples']} resamples",
    ]
    sys.stdout.write("\n".join(lines) + "\n")


@app.command("eval")
def eval_cmd(
    policy: Annotated[str, typer.Option("--policy", help="policy spec: scripted:oracle, "
                                        "hf:PATH[+ADAPTER], openai:MODEL@URL, builtin:tiny")],
    suite: Annotated[str, typer.Option("--suite", help="a family name, a task-mix .yaml or a "
                                       "folder of card folders")],
    n: Annotated[int | None, typer.Option("--n", help="number of cards (default: the whole "
                                          "suite; one seed of every template x variant)")] = None,
    k: Annotated[int, typer.Option("-k", help="samples per card (pass@k needs k >= the "
                                   "largest k reported)")] = 1,
    name: Annotated[str | None, typer.Option("--name", help="a unique name for the run")] = None,
    seed: Annotated[int, typer.Option("--seed", help="rollout seed (episodes replay)")] = 0,
    card_seed: Annotated[int, typer.Option("--card-seed", help="first card seed of a family "
                                           "suite / the task-mix sampling seed")] = 0,
    backend: Annotated[str, typer.Option("--backend", help="sandbox backend: namespace | "
                                         "local")] = "namespace",
    workers: Annotated[int, typer.Option("--workers", help="environment worker threads")] = 4,
    harness_format: Annotated[str | None, typer.Option(
        "--harness", "--harness-format", "--format",
        help="harness format: bash | json | line (default: bash for a chat model, line for "
             "a model without a chat template, json for scripted and API policies)")] = None,
    temperature: Annotated[float | None, typer.Option(
        "--temperature", help="sampling temperature; 0 is greedy (default 1.0)")] = None,
    top_p: Annotated[float | None, typer.Option(
        "--top-p", help="nucleus sampling: keep tokens up to this probability mass "
                        "(default 1.0, off)")] = None,
    max_new_tokens: Annotated[int | None, typer.Option(
        "--max-new-tokens", help="reply budget in tokens (default: the harness's, 256)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the summary as JSON")] = False,
    executor: ExecutorOpt = "local",
    ray_address: RayAddressOpt = None,
) -> None:
    """Evaluate a policy on a suite and store the run.

    Example: ceiling eval --policy scripted:oracle --suite terminal_ops -k 4 --name oracle
    """
    from ..evaluate import run_eval

    check_executor(executor, ray_address)
    rec = run_eval(policy, suite, n=n, k=k, name=name, seed=seed, card_seed=card_seed,
                   backend=backend, workers=workers, harness_format=harness_format,
                   temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens,
                   executor=executor, ray_address=ray_address)
    sys.stderr.write(f"stored run {rec.label} (id {rec.id}); trajectories in "
                     f"{rec.trajectories}\n")
    s = rec.summary
    if s.get("infra_errors"):
        sys.stderr.write(f"warning: {s['infra_errors']} of {s['episodes']} episodes were "
                         "infrastructure errors, left out of every rate; most frequent:\n"
                         + "".join(f"  {m['count']}x {m['message']}\n"
                                   for m in s.get("infra_error_messages", [])))
    if as_json:
        _print_json(rec.summary)
    else:
        _print_summary(rec.summary)


@app.command("compare")
def compare_cmd(
    a: Annotated[str, typer.Argument(help="baseline run (name or id)")],
    b: Annotated[str, typer.Argument(help="candidate run (name or id)")],
    force: Annotated[bool, typer.Option("--force", help="compare runs whose keys differ")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Compare two runs: per-metric deltas with paired statistics, and flipped cards.

    Deltas are B - A over the cards both runs hold, with paired bootstrap intervals and an
    exact McNemar test. Refuses runs with different comparability keys unless --force.

    Example: ceiling compare oracle null
    """
    from ..evaluate import Store, compare

    c = compare(Store(), a, b, force=force)
    if as_json:
        _print_json(c)
        return
    la, lb = c["a"]["name"] or c["a"]["id"], c["b"]["name"] or c["b"]["id"]
    out = [f"{lb} vs {la}: {c['shared_cards']} shared cards"
           + (f" (keys differ in {', '.join(c['differing_parts'])}; forced)"
              if c["differing_parts"] else "")]
    for name, m in c["metrics"].items():
        if m["delta"] is None:
            continue
        lo, hi = m["ci"]
        flag = " *" if hi < 0 or lo > 0 else ""
        out.append(f"  {name:<28} {m['a']:8.3f} -> {m['b']:8.3f}  delta {m['delta']:+.3f} "
                   f"[{lo:+.3f}, {hi:+.3f}]{flag}")
    mc = c["mcnemar"]
    out.append(f"  McNemar exact p = {mc['p']:.3g} ({mc['pass_to_fail']} pass->fail, "
               f"{mc['fail_to_pass']} fail->pass)")
    for kind in ("regressed", "improved"):
        cards = c["flipped"][kind]
        out.append(f"  {kind}: {len(cards)} cards" + (": " + ", ".join(
            x["card"] for x in cards[:10]) + (" ..." if len(cards) > 10 else "") if cards else ""))
    out.append("  (* = the 95% paired bootstrap interval excludes 0)")
    if c["infra_errors"]["a"] or c["infra_errors"]["b"]:
        out.append(f"  note: infra errors left out: {c['infra_errors']['a']} episodes in {la}, "
                   f"{c['infra_errors']['b']} in {lb}")
    sys.stdout.write("\n".join(out) + "\n")


@app.command("gate")
def gate_cmd(
    baseline: Annotated[str, typer.Option("--baseline", help="baseline run (name or id)")],
    candidate: Annotated[str, typer.Option("--candidate", help="candidate run (name or id)")],
    max_drop: Annotated[float, typer.Option("--max-drop", help="tolerated absolute drop")] = 0.02,
    metric: Annotated[list[str] | None, typer.Option(
        "--metric", help="metric(s) to gate (repeatable): pass@1, pass@k, recovery, "
        "boundary.correct_giveup, by_horizon.long, ...")] = None,
    force: Annotated[bool, typer.Option("--force", help="gate runs whose keys differ")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """CI gate: exit 1 when the candidate significantly regresses against the baseline.

    A metric regresses when it drops by more than --max-drop AND its paired 95% bootstrap
    interval of the change lies below 0. Exit 0 otherwise; 2 for bad input.

    Example: ceiling gate --baseline main --candidate pr-42 --max-drop 0.02
    """
    from ..evaluate import Store, gate

    g = gate(Store(), baseline, candidate, max_drop=max_drop,
             metrics=tuple(metric or ("pass@1",)), force=force)
    if as_json:
        _print_json({"passed": g.passed, "reasons": g.reasons, "checks": g.checks})
    else:
        head = "gate passed" if g.passed else "gate FAILED: significant regression"
        sys.stdout.write(head + "\n" + "".join(f"  {r}\n" for r in g.reasons))
    if not g.passed:
        raise typer.Exit(code=1)


@app.command("report")
def report_cmd(
    runs: Annotated[list[str], typer.Argument(help="runs (names or ids); later runs are "
                                              "compared with the first")],
    out: Annotated[Path, typer.Option("--out", help="HTML file to write")] = Path("report.html"),
    force: Annotated[bool, typer.Option("--force", help="compare runs whose keys differ")] = False,
    title: Annotated[str, typer.Option("--title")] = "ceiling evaluation report",
) -> None:
    """Write one self-contained HTML report (inline SVG plots, no network needed).

    Example: ceiling report oracle null --out report.html
    """
    from .._errors import ConfigError
    from ..evaluate import Store, compare, render_report, write_report

    store = Store()
    recs = [store.get(r) for r in runs]
    comparisons, notes = [], []
    for r in recs[1:]:
        try:
            comparisons.append(compare(store, recs[0].id, r.id, force=force))
        except ConfigError as e:
            notes.append(str(e))
    extra = [("Not compared", "<ul>" + "".join(f"<li>{__import__('html').escape(n)}</li>"
                                               for n in notes) + "</ul>")] if notes else []
    from ..evaluate import diagnose_rows, diagnosis_html

    extra += [(f"Diagnosis: {r.label}", diagnosis_html(diagnose_rows(store.episodes(r.id))))
              for r in recs]
    path = write_report(render_report(recs, title=title, comparisons=comparisons,
                                      extra_sections=extra), out)
    sys.stderr.write(f"report written to {path.resolve()}\n")
    for n in notes:
        sys.stderr.write(f"note: {n}\n")


@app.command("view")
def view_cmd(
    port: Annotated[int, typer.Option("--port", help="port (0 picks a free one)")] = 8765,
    host: Annotated[str, typer.Option("--host", help="address to bind")] = "127.0.0.1",
) -> None:
    """Serve a local web page to browse runs and read trajectories step by step.

    Example: ceiling view --port 8765   (then open http://127.0.0.1:8765/)
    """
    from ..evaluate import make_server

    srv = make_server(host=host, port=port)
    sys.stderr.write(f"ceiling view on http://{host}:{srv.server_address[1]}/ (Ctrl-C stops)\n")
    try:
        srv.serve_forever()
    finally:
        srv.server_close()
