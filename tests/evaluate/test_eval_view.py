"""``ceiling view`` pages, checked in a real headless Chromium (not only as HTML strings)."""

from __future__ import annotations

import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from eval_fakes import card_runs, traj

from ceiling.evaluate import Store, make_server, record_run

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CARD = "t/a-v1@s0-d1-train"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    store = Store()
    t = traj(CARD, 0, "failed", steps=3)
    t.turns[0].observation = "<script>window.pwned=1</script> & <b>bold</b>"
    t.turns[1].parse_error = "not a tool call"
    t.turns[1].action = None
    trajs = [t, *card_runs("t/a-v1@s1-d1-train", ["solved"])]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(x.to_json() + "\n" for x in trajs))
    record_run(trajs, policy="scripted:oracle", suite="t", card_ids=["a", "b"],
               harness_fingerprint="fp", sampling={}, trajectories_path=path, name="demo",
               store=store)
    srv = make_server(store, port=0)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def _dom(url: str, tmp: Path) -> str:
    if not Path(CHROMIUM).exists():
        pytest.skip("chromium is not installed")
    out = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
         "--no-first-run", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", f"--user-data-dir={tmp / 'chrome'}", "--virtual-time-budget=3000",
         "--dump-dom", url], check=False, capture_output=True, text=True, timeout=90)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def test_pages_and_api_over_http(server: str) -> None:
    r = httpx.get(server + "/")
    assert r.status_code == 200 and "demo" in r.text
    runs = httpx.get(server + "/api/runs").json()
    assert runs[0]["name"] == "demo" and runs[0]["summary"]["cards"] == 2
    page = httpx.get(server + "/run?id=demo").text
    assert CARD in page and "failed" in page
    ep = httpx.get(server + f"/api/episode?run=demo&card={quote(CARD)}&sample=0").json()
    assert ep["card_id"] == CARD and len(ep["turns"]) == 3
    missing = httpx.get(server + f"/episode?run=demo&card={quote(CARD)}&sample=9")
    assert missing.status_code == 404 and "no episode" in missing.text
    assert httpx.get(server + "/run?id=nope").status_code == 404
    assert "Run-to-run" not in httpx.get(server + "/report?runs=demo").text


def test_trajectory_reads_step_by_step_in_chromium(server: str, tmp_path: Path) -> None:
    dom = _dom(server + f"/episode?run=demo&card={quote(CARD)}&sample=0", tmp_path)
    assert "Step 1 of 3" in dom  # set by the page's script: it ran in the browser
    assert dom.count('class="step hidden"') == 2  # one step shown at a time
    # model output is escaped text, never markup
    assert "&lt;script&gt;window.pwned=1&lt;/script&gt;" in dom and "<b>bold</b>" not in dom
    assert "parse error: not a tool call" in dom and 'id="outcome">failed' in dom
    index = _dom(server + "/", tmp_path)
    assert 'id="runs"' in index and "scripted:oracle" in index
