"""Template ``terminal_ops/log-aggregate``: per-day status-code counts with grep/awk/sort.

``logs/`` holds one web access log per day. For each day the agent writes
``report/DAY.txt``: one line ``CODE COUNT`` per HTTP status code seen that day, sorted by
code. The hidden tests compare every report with counts computed at generation time. The
oracle is one pipeline per day, so difficulty (1-3, 9-20, 30-36 days) sets the horizon.

Variants: ``train`` logs are in the common log format (``access-DAY.log``); ``heldout``
logs are CSV with a header (``requests-DAY.csv``, status in column 5) — a format train never
shows; ``fault`` removes ``awk`` from PATH (the oracle uses ``cut | sort | uniq -c | sed``);
``infeasible`` asks for a day whose log is missing (counting it would be making numbers up).
"""

from __future__ import annotations

import random
from collections import Counter
from datetime import date, timedelta
from typing import ClassVar

from ...cards import TaskCard
from .._common import TestModule, finish_card, missing_tool
from .._registry import Template, Variant, register

_DAYS = {1: (1, 3), 2: (9, 20), 3: (30, 36)}
_CODES = ("200", "200", "200", "201", "204", "301", "302", "304", "400", "401", "403", "404",
          "500", "502", "503")
_PATHS = ("/", "/login", "/api/items", "/api/users", "/static/app.js", "/health", "/search")


@register
class LogAggregate(Template):
    family = "terminal_ops"
    name = "log-aggregate"
    summary = "count HTTP status codes per day from access logs into report files"
    horizons: ClassVar[dict[int, str]] = {1: "short", 2: "medium", 3: "long"}
    tags = ("text", "aggregate")

    def generate(self, rng: random.Random, difficulty: int, variant: Variant) -> TaskCard:
        csv = variant == "heldout"
        n = rng.randint(*_DAYS[difficulty])
        start = date(2024, 1, 1) + timedelta(days=rng.randint(0, 300))
        days = [(start + timedelta(days=i)).isoformat() for i in range(n)]
        codes = rng.sample(_CODES, rng.randint(3, 7))
        workspace: dict[str, str] = {}
        reports: dict[str, str] = {}
        for day in days:
            counts: Counter[str] = Counter()
            rows = []
            for _ in range(rng.randint(5, 25)):
                ip = f"10.{rng.randint(0, 9)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}"
                code = rng.choice(codes)
                counts[code] += 1
                path, size = rng.choice(_PATHS), rng.randint(0, 50_000)
                t = f"{rng.randint(10, 23)}:{rng.randint(10, 59)}:{rng.randint(10, 59)}"
                if csv:
                    rows.append(f"{day}T{t},{ip},GET,{path},{code},{size}")
                else:
                    rows.append(f'{ip} - - [{day}:{t} +0000] "GET {path} HTTP/1.1" {code} {size}')
            name = f"logs/requests-{day}.csv" if csv else f"logs/access-{day}.log"
            header = "time,ip,method,path,status,bytes\n" if csv else ""
            workspace[name] = header + "".join(r + "\n" for r in rows)
            reports[day] = "".join(f"{c} {counts[c]}\n" for c in sorted(counts))
        tm = TestModule(helpers='def lines(path):\n'
                                '    return [" ".join(ln.split()) for ln in '
                                'read_regular(path).splitlines() if ln.strip()]')
        for i, day in enumerate(days):
            tm.add(f"report_{i}", f"assert lines('report/{day}.txt') == "
                                  f"{reports[day].splitlines()!r}")
        lines = ["mkdir -p report"]
        for day in days:
            if csv:
                src = f"tail -n +2 logs/requests-{day}.csv | cut -d, -f5"
            elif variant == "fault":
                src = f"cut -d' ' -f9 logs/access-{day}.log"
            else:
                src = f"awk '{{print $9}}' logs/access-{day}.log"
            tail = (" | sort | uniq -c | sed -E 's/^ *([0-9]+) (.*)/\\2 \\1/'"
                    if csv or variant == "fault" else " | sort | uniq -c | awk '{print $2, $1}'")
            lines.append(f"{src}{tail} > report/{day}.txt")
        fmt = ("CSV files logs/requests-DAY.csv (with a header; the status is the 5th column)"
               if csv else "files logs/access-DAY.log in the common log format")
        instr = (f"The web server's access logs are the {fmt}. For each day from {days[0]} to "
                 f"{days[-1]}, write report/DAY.txt with one line 'CODE COUNT' per HTTP status "
                 "code seen that day (e.g. '200 14'), sorted by code.")
        reason = None
        if variant == "infeasible":
            gone = days[rng.randrange(len(days))]
            del workspace[f"logs/access-{gone}.log"]
            reason = f"the log for {gone} is missing, so its report cannot be computed"
        return finish_card(type(self), variant=variant, instruction=instr, workspace=workspace,
                           tests=tm, solution=lines,
                           faults=[missing_tool("awk")] if variant == "fault" else [],
                           infeasible_reason=reason, protected=["logs/*"])
