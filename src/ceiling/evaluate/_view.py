"""``ceiling view``: a local web page to browse stored runs and read any trajectory step by
step. Standard library only (``http.server``), bound to 127.0.0.1 by default.

Pages: ``/`` (runs), ``/run?id=RUN`` (summary and episodes), ``/episode?run=RUN&card=ID&
sample=N`` (one trajectory: each turn's reply, parsed action, observation; a small script
shows one step at a time with Prev/Next and the arrow keys, and every step is readable
without it), ``/report?runs=A,B`` (the HTML report), ``/api/runs`` and ``/api/episode``
(JSON). Every piece of model output is HTML-escaped. The server reads the store and the
trajectory files; it never writes.
"""

from __future__ import annotations

import json
import threading
from html import escape
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, urlparse

from .._errors import CeilingError
from ..rollout import Trajectory
from ._report import render_report
from ._store import Store, load_trajectories

_CSS = """
body{font-family:system-ui,sans-serif;margin:20px auto;max-width:1100px;padding:0 16px;
 color:#111}
a{color:#1d4ed8} table{border-collapse:collapse;font-size:13px}
th,td{border:1px solid #ddd;padding:3px 8px;text-align:left} th{background:#f3f4f6}
pre{background:#f8fafc;border:1px solid #e5e7eb;padding:8px;white-space:pre-wrap;
 word-break:break-word;margin:4px 0;font-size:12px}
.step{border:1px solid #cbd5e1;border-radius:6px;padding:8px 12px;margin:10px 0}
.step h3{margin:0 0 6px 0;font-size:14px} .err{color:#b91c1c}
.solved,.abstained_correct{color:#15803d;font-weight:600}
.failed,.abstained_wrong,.hack_detected,.truncated{color:#b91c1c;font-weight:600}
.infra_error{color:#92400e;font-weight:600} .nav{position:sticky;top:0;background:#fff;
 padding:6px 0;border-bottom:1px solid #ddd} .hidden{display:none}
"""

_STEP_JS = """
(function(){
  var steps=[].slice.call(document.querySelectorAll('section.step'));
  var cur=0, all=false, pos=document.getElementById('pos');
  function show(){
    steps.forEach(function(s,i){s.classList.toggle('hidden', !all && i!==cur);});
    pos.textContent = all ? 'all ' + steps.length + ' steps' :
      'Step ' + (steps.length ? cur+1 : 0) + ' of ' + steps.length;
  }
  function go(d){cur=Math.max(0,Math.min(steps.length-1,cur+d));all=false;show();}
  document.getElementById('prev').onclick=function(){go(-1);};
  document.getElementById('next').onclick=function(){go(1);};
  document.getElementById('all').onclick=function(){all=!all;show();};
  document.addEventListener('keydown',function(e){
    if(e.key==='ArrowRight')go(1); if(e.key==='ArrowLeft')go(-1);});
  document.getElementById('nav').classList.remove('hidden');
  show();
})();
"""


def _page(title: str, body: str, script: str = "") -> bytes:
    js = f"<script>{script}</script>" if script else ""
    return (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{escape(title)}"
            f"</title><style>{_CSS}</style></head><body><p><a href='/'>runs</a></p>{body}{js}"
            "</body></html>").encode()


def _rate(m: dict[str, Any] | None) -> str:
    if not m or m.get("value") is None:
        return "n/a"
    ci = m.get("ci")
    return f"{m['value']:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


class _Viewer:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._cache: dict[str, tuple[float, list[Trajectory]]] = {}
        self._lock = threading.Lock()

    def trajectories(self, path: str) -> list[Trajectory]:
        import os

        mtime = os.stat(path).st_mtime if os.path.exists(path) else -1.0
        with self._lock:
            hit = self._cache.get(path)
            if hit and hit[0] == mtime:
                return hit[1]
        trajs = load_trajectories(path)
        with self._lock:
            self._cache[path] = (mtime, trajs)
        return trajs

    def index(self) -> bytes:
        runs = self.store.list_runs()
        rows = "".join(
            f"<tr><td><a href='/run?id={quote(r.id)}'>{escape(r.label)}</a></td>"
            f"<td>{escape(r.id)}</td><td>{escape(r.policy)}</td><td>{escape(r.suite)}</td>"
            f"<td><code>{escape(r.key)}</code></td><td>{r.summary.get('cards', '')}</td>"
            f"<td>{r.summary.get('k', '')}</td><td>{_rate(r.summary.get('pass@1'))}</td>"
            f"<td>{escape(r.created)}</td></tr>" for r in runs)
        body = ("<h1>ceiling runs</h1>" + (
            "<table id=runs><tr><th>run</th><th>id</th><th>policy</th><th>suite</th><th>key"
            "</th><th>cards</th><th>k</th><th>pass@1 [95% CI]</th><th>created</th></tr>"
            f"{rows}</table>" if runs else "<p>No runs yet: <code>ceiling eval --policy "
            "scripted:oracle --suite terminal_ops</code></p>")
            + (f"<p><a href='/report?runs={quote(','.join(r.id for r in runs[:6]))}'>report "
               "of the latest runs</a></p>" if runs else ""))
        return _page("ceiling runs", body)

    def run(self, ref: str) -> bytes:
        r = self.store.get(ref)
        s = r.summary
        rows = "".join(
            f"<tr><td><a href='/episode?run={quote(r.id)}&card={quote(e['card_id'])}&sample="
            f"{e['sample']}'>{escape(e['card_id'])}</a></td><td>{e['sample']}</td>"
            f"<td class='{escape(e['outcome'])}'>{escape(e['outcome'])}</td>"
            f"<td>{e['reward']:.2f}</td><td>{e['steps']}</td><td>{escape(e['horizon'])}</td>"
            f"<td>{escape(e['split'])}</td><td>{'' if e['feasible'] else 'infeasible'}"
            f"{' faults' if e['faults'] else ''}</td></tr>"
            for e in self.store.episodes(r.id))
        body = (f"<h1>run {escape(r.label)}</h1><p>policy <code>{escape(r.policy)}</code>, "
                f"suite <code>{escape(r.suite)}</code>, key <code>{escape(r.key)}</code>, "
                f"{escape(r.created)}</p><p>pass@1 {_rate(s.get('pass@1'))}; pass@{s.get('k')} "
                f"{_rate(s.get('pass@k'))}; recovery {_rate(s.get('recovery'))}; correct "
                f"give-up {_rate((s.get('boundary') or {}).get('correct_giveup'))}</p>"
                f"<p><a href='/report?runs={quote(r.id)}'>full report</a></p>"
                "<table id=episodes><tr><th>card</th><th>sample</th><th>outcome</th><th>reward"
                "</th><th>steps</th><th>horizon</th><th>split</th><th>variant</th></tr>"
                f"{rows}</table>")
        return _page(f"run {r.label}", body)

    def find(self, ref: str, card: str, sample: int) -> Trajectory:
        r = self.store.get(ref)
        for t in self.trajectories(r.trajectories):
            if t.card_id == card and t.sample == sample:
                return t
        raise CeilingError(f"run {r.label!r} has no episode {card!r} sample {sample}")

    def episode(self, ref: str, card: str, sample: int) -> bytes:
        t = self.find(ref, card, sample)
        steps = []
        for i, turn in enumerate(t.turns, 1):
            act = json.dumps(turn.action) if turn.action is not None else ""
            steps.append(
                f"<section class=step id='step-{i}'><h3>step {i}</h3>"
                f"<div>reply</div><pre class=reply>{escape(turn.text)}</pre>"
                + (f"<div>action <code class=action>{escape(act)}</code></div>" if act else "")
                + (f"<div class=err>parse error: {escape(turn.parse_error)}</div>"
                   if turn.parse_error else "")
                + f"<div>observation</div><pre class=obs>{escape(turn.observation)}</pre>"
                f"<div style='font-size:11px;color:#555'>step reward {turn.step_reward:g}, "
                f"policy {turn.policy_s:.3f} s, env {turn.env_s:.3f} s</div></section>")
        v = t.verdict or {}
        tests = "".join(f"<tr><td>{escape(str(x.get('id')))}</td><td>"
                        f"{escape(str(x.get('status')))}</td><td>{escape(str(x.get('message', '')))}"
                        "</td></tr>" for x in v.get("tests", []))
        evidence = "".join(f"<li>{escape(str(e))}</li>" for e in v.get("evidence", []))
        body = (f"<h1>{escape(t.card_id)} <small>sample {t.sample}</small></h1>"
                f"<p>outcome <span class='{escape(t.outcome)}' id=outcome>{escape(t.outcome)}"
                f"</span>, reward {t.reward:g}, {len(t.turns)} steps, policy "
                f"<code>{escape(t.policy)}</code>, harness <code>"
                f"{escape(t.harness_fingerprint[:16])}</code>, seed {t.seed}</p>"
                + (f"<p class=err>error: {escape(t.error)}</p>" if t.error else "")
                + "<div id=nav class='nav hidden'><button id=prev>&larr; Prev</button> "
                "<span id=pos></span> <button id=next>Next &rarr;</button> "
                "<button id=all>all steps</button></div>"
                + ("".join(steps) or "<p>No step was taken.</p>")
                + "<h2>Verdict</h2>"
                + (f"<table><tr><th>test</th><th>status</th><th>message</th></tr>{tests}</table>"
                   if tests else "")
                + (f"<ul>{evidence}</ul>" if evidence else "")
                + f"<pre>{escape(json.dumps(v.get('components', {}), indent=1))}</pre>")
        return _page(t.card_id, body, _STEP_JS if steps else "")

    def report(self, refs: list[str]) -> bytes:
        return render_report([self.store.get(r) for r in refs]).encode()


def make_server(store: Store | None = None, host: str = "127.0.0.1",
                port: int = 8765) -> ThreadingHTTPServer:
    """A ready server (call ``serve_forever``); port 0 picks a free port."""
    viewer = _Viewer(store or Store())

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def _send(self, code: int, body: bytes, ctype: str = "text/html; charset=utf-8") -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            u = urlparse(self.path)
            q = {k: v[0] for k, v in parse_qs(u.query).items()}
            try:
                if u.path == "/":
                    self._send(200, viewer.index())
                elif u.path == "/run":
                    self._send(200, viewer.run(q.get("id", "")))
                elif u.path == "/episode":
                    self._send(200, viewer.episode(q.get("run", ""), q.get("card", ""),
                                                   int(q.get("sample", "0"))))
                elif u.path == "/report":
                    self._send(200, viewer.report([x for x in q.get("runs", "").split(",") if x]))
                elif u.path == "/api/runs":
                    data = [r.model_dump() for r in viewer.store.list_runs()]
                    self._send(200, json.dumps(data).encode(), "application/json")
                elif u.path == "/api/episode":
                    t = viewer.find(q.get("run", ""), q.get("card", ""), int(q.get("sample", "0")))
                    self._send(200, t.to_json().encode(), "application/json")
                else:
                    self._send(404, _page("not found", f"<p>No page {escape(u.path)}.</p>"))
            except (CeilingError, ValueError) as e:
                self._send(404, _page("not found", f"<p class=err>{escape(str(e))}</p>"))

    return ThreadingHTTPServer((host, port), Handler)


__all__ = ["make_server"]
