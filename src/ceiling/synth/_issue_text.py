"""Issue-like instructions for synthesized cards.

The text says what is observed, as a user would report it: which of the project's tests
now fail and an excerpt of the assertion or error (pytest's ``E`` lines), never the file,
the line or the fix. Excerpts are scrubbed of every line that names a library file, of
``file.py:LINE`` locations, of ``0x...`` addresses and of source lines pytest quotes from
the library (lines starting with ``>``). :func:`template_issue` is deterministic;
:func:`rewrite_with_model` asks an OpenAI-compatible chat endpoint
(``--writer openai:MODEL@URL``) to rephrase it under the same rules and falls back to the
template text (with the reason in the report) when the answer names a library file or the
endpoint fails.
"""

from __future__ import annotations

import json
import random
import re
import urllib.request
from collections.abc import Mapping, Sequence

_OPENERS = (
    "After a recent change, part of {project} misbehaves.",
    "Users of {project} report a regression.",
    "Something broke in {project}: its own test suite is no longer green.",
    "A bug slipped into {project}.",
)
_CLOSERS = (
    ("Find the cause in the library code and fix it so these tests pass again. Do not edit "
     "the tests."),
    "Please track the regression down in the library (not in the tests) and repair it.",
)
_LOC = re.compile(r"[\w./\\-]+\.py:\d+")


def scrub(message: str, banned: Sequence[str]) -> list[str]:
    """The ``E`` lines of a pytest failure, without library paths or locations."""
    names = {b for b in banned} | {b.rsplit("/", 1)[-1] for b in banned}
    out = []
    for ln in message.splitlines():
        s = ln.strip()
        if not s.startswith("E "):
            continue
        if any(n and n in s for n in names):
            continue
        s = _LOC.sub("", s)
        s = re.sub(r" at 0x[0-9a-f]+", "", s)
        s = s[:200]
        if s not in out:
            out.append(s)
        if len(out) >= 6:
            break
    return out


def _test_name(nodeid: str) -> str:
    return nodeid.split("::", 1)[-1] if "::" in nodeid else nodeid


def template_issue(project: str, failing: Sequence[str], messages: Mapping[str, str],
                   banned: Sequence[str], seed: int) -> str:
    """The instruction for a card whose ``failing`` hidden tests broke."""
    rng = random.Random(seed)
    shown = list(failing[:4])
    parts = [rng.choice(_OPENERS).format(project=project)]
    names = ", ".join(f"`{_test_name(t)}`" for t in shown)
    more = f" (and {len(failing) - len(shown)} more)" if len(failing) > len(shown) else ""
    parts.append(f"These tests of the project fail now: {names}{more}.")
    for t in shown[:2]:
        lines = scrub(messages.get(t, ""), banned)
        if lines:
            parts.append(f"`{_test_name(t)}` reports:\n\n```\n" + "\n".join(lines) + "\n```")
    parts.append(rng.choice(_CLOSERS))
    return "\n\n".join(parts)


def leaks(text: str, banned: Sequence[str]) -> str | None:
    """The first banned name (a library file) the text mentions, or None."""
    for b in banned:
        for n in (b, b.rsplit("/", 1)[-1]):
            if n and n in text:
                return n
    return None


def rewrite_with_model(spec: str, text: str, banned: Sequence[str], *,
                       timeout: float = 60.0) -> tuple[str, str | None]:
    """Rephrase ``text`` with ``openai:MODEL@URL``; returns (text, why it fell back or None)."""
    if not spec.startswith("openai:") or "@" not in spec:
        return text, "writer must look like openai:MODEL@http://host:port/v1"
    model, _, url = spec[len("openai:"):].partition("@")
    prompt = ("Rewrite this bug report as a concise GitHub issue written by a user. Keep "
              "the failing test names and the error excerpt. Do not guess the cause, do not "
              "name any source file, line number or fix. Reply with the issue text only.\n\n"
              + text)
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": prompt}],
                       "temperature": 0.7, "max_tokens": 600}).encode()
    req = urllib.request.Request(url.rstrip("/") + "/chat/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            data = json.loads(r.read())
        out = str(data["choices"][0]["message"]["content"]).strip()
    except Exception as e:  # noqa: BLE001 - any failure keeps the template text
        return text, f"writer failed: {type(e).__name__}: {e}"[:200]
    hit = leaks(out, banned)
    if hit or not out:
        return text, f"writer named {hit!r}" if hit else "writer answered nothing"
    return out, None
