"""Grading-time services: start a card's ``acceptance.service`` before its tests.

:func:`start_service` runs the command in the background in the grading sandbox (as the
agent's uid, in that sandbox's namespaces: a server it starts on 127.0.0.1 is what the
tests reach), then polls ``acceptance.service_ready`` (exit 0 = ready) for at most
``service_wait_s`` seconds, or waits one second when the card names no check. Its output goes
to ``/tmp/.ceiling-service.log`` in that sandbox. Returns facts for the verdict's detail; a
service that never gets ready is not an infrastructure error (the tests that need it fail,
and ``ceiling envs validate`` catches a card whose oracle cannot pass that way).
"""

from __future__ import annotations

import time
from typing import Any

from ..cards import TaskCard

LOG = "/tmp/.ceiling-service.log"


def start_service(card: TaskCard, sandbox: Any) -> dict[str, Any]:
    acc = card.acceptance
    if not acc.service:
        return {}
    t0 = time.monotonic()
    r = sandbox.exec(f"({acc.service}) >{LOG} 2>&1 </dev/null &", timeout=30)
    facts: dict[str, Any] = {"service_started": r.exit_code == 0}
    if acc.service_ready:
        ready = False
        while time.monotonic() - t0 < acc.service_wait_s:
            c = sandbox.exec(acc.service_ready, timeout=min(10.0, acc.service_wait_s))
            if c.exit_code == 0 and not c.timed_out:
                ready = True
                break
            time.sleep(0.2)
        facts["service_ready"] = ready
    else:
        time.sleep(1.0)
    facts["service_s"] = round(time.monotonic() - t0, 3)
    return facts


__all__ = ["start_service"]
