"""The small HTTP service a multi_tool card ships in its workspace (``service.py``).

The agent starts it inside the sandbox (``python3 service.py > /dev/null 2>&1 &``) and
reaches it on the sandbox's own loopback (``curl http://127.0.0.1:PORT/...``). It is plain
standard-library Python so any sandbox with ``python3`` runs it. What it serves comes from a
:class:`ServiceSpec`:

- ``lookups``: ``GET /<name>/<key>`` returns a JSON record (rates, suppliers, ...), or 404
  with an error message for an unknown key;
- ``actions``: ``POST /<name>`` with a JSON body of the declared fields returns
  ``{"ticket": "PREFIX-XXXXXXXXXX"}`` (201). The ticket is an HMAC of the canonical payload
  under a per-card secret, so the hidden tests know the right ticket without trusting the
  agent, and no ticket can be guessed or reused across seeds.

Field kinds: ``int`` (an integer or a string of digits), ``str`` (trimmed), ``key``
(trimmed, lower-cased), ``enum:a|b`` (one of the listed words). The canonical payload is
the coerced fields as sorted, compact JSON, so ``"17"`` and ``17`` give the same ticket.

Limits (stated, not hidden): the script, its secret and its lookup tables are readable in
the workspace. An agent that reads them instead of calling the API still has to derive the
right payload from the database and the documents; the hidden tests check the payload
through the ticket, so this shortcut earns nothing a correct call would not. The cards
protect ``service.py`` so that rewriting it is tampering.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

IDLE_EXIT_S = 900  # the service exits after this long without a request


@dataclass
class Action:
    """``POST /<name>``: declared ``fields`` (name -> kind) in, a ticket with ``prefix`` out."""

    name: str
    prefix: str
    fields: dict[str, str]
    help: str = ""


@dataclass
class ServiceSpec:
    port: int
    secret: str
    title: str
    actions: list[Action] = field(default_factory=list)
    # name -> {key -> record}; the error text names what was not found ("currency", "sku")
    lookups: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    lookup_nouns: dict[str, str] = field(default_factory=dict)

    def action(self, name: str) -> Action:
        return next(a for a in self.actions if a.name == name)

    def ticket(self, action: str, payload: dict[str, Any]) -> str:
        """The ticket the running service returns for this payload (same code as the script)."""
        a = self.action(action)
        canon = canonical(a.fields, payload)
        mac = hmac.new(self.secret.encode(), f"/{a.name}|{canon}".encode(), hashlib.sha256)
        return f"{a.prefix}-{mac.hexdigest()[:10].upper()}"

    def url(self, path: str = "") -> str:
        return f"http://127.0.0.1:{self.port}/{path.lstrip('/')}"


def new_service(rng: random.Random, title: str) -> ServiceSpec:
    """A spec with a seeded port in [20000, 50000) and a 128-bit secret from ``rng``."""
    return ServiceSpec(port=rng.randrange(20000, 50000), secret=f"{rng.getrandbits(128):032x}",
                       title=title)


def canonical(fields: dict[str, str], payload: dict[str, Any]) -> str:
    return json.dumps({k: coerce(kind, payload[k]) for k, kind in fields.items()},
                      sort_keys=True, separators=(",", ":"))


def render(spec: ServiceSpec) -> str:
    """The workspace's ``service.py`` for ``spec``."""
    data = {
        "port": spec.port, "secret": spec.secret, "title": spec.title, "idle": IDLE_EXIT_S,
        "actions": {a.name: {"prefix": a.prefix, "fields": a.fields, "help": a.help}
                    for a in spec.actions},
        "lookups": spec.lookups, "nouns": spec.lookup_nouns,
    }
    return _SCRIPT.replace("@@SPEC@@", json.dumps(data, indent=1, sort_keys=True))


_SCRIPT = r'''"""A small JSON API for this task (standard library only).

Start it in the background:   python3 service.py > /dev/null 2>&1 &
It listens on 127.0.0.1 (the port is in SPEC below; override with --port N), writes its
process id to service.pid and exits after SPEC["idle"] seconds without a request.
GET / lists the endpoints.
"""
import hashlib
import hmac
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SPEC = json.loads(r"""@@SPEC@@""")
LAST = [time.monotonic()]


def coerce(kind, value):
    if kind == "int":
        if isinstance(value, bool):
            raise ValueError("must be an integer")
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            return int(value.strip())
        raise ValueError("must be an integer")
    if not isinstance(value, (str, int)) or isinstance(value, bool):
        raise ValueError("must be a string")
    text = str(value).strip()
    if kind == "str":
        return text
    if kind == "key":
        return text.lower()
    if kind.startswith("enum:"):
        choices = kind[5:].split("|")
        if text.lower() not in choices:
            raise ValueError("must be one of %s" % choices)
        return text.lower()
    raise ValueError("unknown field kind")


class Handler(BaseHTTPRequestHandler):
    def log_message(self, fmt, *args):
        pass

    def reply(self, code, obj):
        body = (json.dumps(obj, sort_keys=True) + "\n").encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        LAST[0] = time.monotonic()
        parts = [p for p in self.path.split("?")[0].split("/") if p]
        if not parts:
            eps = ["GET /%s/<%s>" % (n, SPEC["nouns"].get(n, "key")) for n in sorted(SPEC["lookups"])]
            eps += ["POST /%s %s" % (n, json.dumps(a["fields"], sort_keys=True))
                    for n, a in sorted(SPEC["actions"].items())]
            return self.reply(200, {"service": SPEC["title"], "endpoints": eps})
        table = SPEC["lookups"].get(parts[0])
        if table is None or len(parts) != 2:
            return self.reply(404, {"error": "no such endpoint; GET / lists them"})
        rec = table.get(parts[1]) or table.get(parts[1].lower()) or table.get(parts[1].upper())
        if rec is None:
            noun = SPEC["nouns"].get(parts[0], "key")
            return self.reply(404, {"error": "unknown %s %r" % (noun, parts[1])})
        return self.reply(200, rec)

    def do_POST(self):
        LAST[0] = time.monotonic()
        parts = [p for p in self.path.split("?")[0].split("/") if p]
        act = SPEC["actions"].get(parts[0]) if len(parts) == 1 else None
        if act is None:
            return self.reply(404, {"error": "no such endpoint; GET / lists them"})
        try:
            n = int(self.headers.get("Content-Length") or 0)
            payload = json.loads(self.rfile.read(n) or b"{}")
        except ValueError:
            return self.reply(400, {"error": "the body must be a JSON object"})
        if not isinstance(payload, dict):
            return self.reply(400, {"error": "the body must be a JSON object"})
        fields = act["fields"]
        extra = sorted(set(payload) - set(fields))
        missing = sorted(set(fields) - set(payload))
        if extra or missing:
            return self.reply(400, {"error": "fields must be exactly %s" % sorted(fields),
                                    "missing": missing, "unexpected": extra})
        try:
            canon = json.dumps({k: coerce(kind, payload[k]) for k, kind in fields.items()},
                               sort_keys=True, separators=(",", ":"))
        except ValueError as e:
            return self.reply(400, {"error": str(e)})
        mac = hmac.new(SPEC["secret"].encode(), ("/%s|%s" % (parts[0], canon)).encode(),
                       hashlib.sha256)
        ticket = "%s-%s" % (act["prefix"], mac.hexdigest()[:10].upper())
        with open("requests.log", "a") as f:
            f.write(json.dumps({"path": self.path, "payload": json.loads(canon),
                                "ticket": ticket}, sort_keys=True) + "\n")
        return self.reply(201, {"ticket": ticket})


def main():
    port = SPEC["port"]
    if "--port" in sys.argv:
        port = int(sys.argv[sys.argv.index("--port") + 1])
    try:
        server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    except OSError as e:
        print("service: cannot listen on 127.0.0.1:%d (%s); is it already running?" % (port, e),
              file=sys.stderr)
        sys.exit(1)
    print("service: listening on http://127.0.0.1:%d" % port, flush=True)
    with open("service.pid", "w") as f:
        f.write("%d\n" % os.getpid())
    # let go of the caller's terminal or pipes, so `python3 service.py &` returns at once
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    while time.monotonic() - LAST[0] < SPEC["idle"]:
        time.sleep(1)
    server.shutdown()


if __name__ == "__main__":
    main()
'''


def _script_function(name: str) -> Callable[..., Any]:
    """A top-level function of the service script, so the host (which recomputes tickets
    for the hidden tests) and the running service share one implementation."""
    start = _SCRIPT.index(f"\ndef {name}(")
    end = _SCRIPT.index("\n\n\n", start)
    namespace: dict[str, Any] = {}
    exec(compile(_SCRIPT[start:end], f"<service.py:{name}>", "exec"), namespace)  # noqa: S102
    return cast(Callable[..., Any], namespace[name])


# Coerce one field value; raises ValueError with a message for the HTTP reply.
coerce = _script_function("coerce")
