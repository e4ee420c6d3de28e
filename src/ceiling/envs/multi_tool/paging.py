"""multi_tool/incident-paging: database -> runbooks -> paging API.

Every open severity-1 incident in ``shop.db`` must be paged to the team that owns its
component, as the runbooks in ``docs/`` say; ``pages.txt`` gets one ``INCIDENT_ID PAGE_ID``
line per page. Decoys: closed sev-1 and open sev-2/3 incidents, a "previous owner" line in
each runbook.

- difficulty 1/2/3: 1 / 4 / 14 open sev-1 incidents (short / medium / long);
- heldout: incidents name their service by an *alias*; ``docs/aliases.md`` maps aliases to
  components and one ownership table (``docs/ownership.md``) replaces the runbooks (one
  more hop per incident);
- fault: see :func:`._kit.pick_fault`;
- infeasible: the first open sev-1 incident's component has no owner anywhere in ``docs/``.
"""

from __future__ import annotations

import random
from typing import ClassVar

from ...cards import TaskCard
from .._registry import Template, Variant, register
from ._kit import (
    WORK,
    build_card,
    build_db,
    field_expr,
    filler_docs,
    pick_fault,
    post_line,
    prep_line,
    sql_line,
    start_lines,
)
from ._service import Action, new_service

COMPONENTS = ("billing-api", "search-index", "auth-gateway", "image-cache", "order-queue",
              "email-relay", "report-builder", "stock-sync", "price-engine", "cart-store",
              "ledger-db", "session-proxy", "geo-lookup", "tax-calc", "invoice-pdf",
              "notify-push", "audit-trail", "feature-flags", "rate-limiter", "cdn-edge")
TEAMS = ("payments", "platform", "storefront", "identity", "data", "logistics", "growth",
         "infra", "finance-eng", "mobile")
OPEN_SEV1 = {1: 1, 2: 4, 3: 14}


@register
class IncidentPaging(Template):
    family = "multi_tool"
    name = "incident-paging"
    summary = "open sev-1 incidents in the db -> owning team in the runbooks -> paging API"
    difficulties = (1, 2, 3)
    horizons: ClassVar[dict[int, str]] = {1: "short", 2: "medium", 3: "long"}
    tags = ("sql", "search", "http")

    def generate(self, rng: random.Random, difficulty: int, variant: Variant) -> TaskCard:
        k = OPEN_SEV1[difficulty]
        heldout, infeasible = variant == "heldout", variant == "infeasible"
        comps = rng.sample(COMPONENTS, min(len(COMPONENTS), k + 5))
        owner = {c: rng.choice(TEAMS) for c in comps}
        alias = {c: "".join(w[:3] for w in c.split("-")) + str(rng.randint(1, 9)) for c in comps}
        kinds = [(1, "open")] * k + [(1, "closed")] * (2 + k // 2) + [
            (rng.choice([2, 3]), rng.choice(["open", "closed"])) for _ in range(3 + k)]
        rng.shuffle(kinds)
        incidents = []
        iid = rng.randint(100, 400)
        for sev, status in kinds:
            iid += rng.randint(1, 4)
            c = rng.choice(comps)
            incidents.append((iid, alias[c] if heldout else c, sev, status,
                              f"2024-0{rng.randint(1, 9)}-{rng.randint(10, 28)}"))
        targets = [(iid, comp) for iid, comp, sev, status, _ in incidents
                   if sev == 1 and status == "open"]
        comp_of = {alias[c]: c for c in comps} if heldout else {c: c for c in comps}
        reason = None
        documented = set(comps)
        if infeasible:
            gone = comp_of[targets[0][1]]
            documented.discard(gone)
            reason = f"component {gone!r} has no owning team anywhere in docs/"

        docs = filler_docs(rng)
        if heldout:
            docs["docs/aliases.md"] = "# Service aliases\n\n" + "".join(
                f"- alias `{alias[c]}` is the component {c}\n" for c in rng.sample(comps, len(comps)))
            docs["docs/ownership.md"] = ("# Ownership\n\n| component | team |\n|---|---|\n"
                                         + "".join(f"| {c} | {owner[c]} |\n"
                                                   for c in sorted(documented)))
            doc_dirs = ["docs", "docs/general"]
        else:
            for c in sorted(documented):
                prev = rng.choice([t for t in TEAMS if t != owner[c]])
                docs[f"docs/runbooks/{c}.md"] = (
                    f"# Runbook: {c}\n\nPrevious owner (until 2023): {prev}\n"
                    f"Owning team: {owner[c]}\n\nRestart with the deploy tool; check the "
                    "dashboards first.\n")
            doc_dirs = ["docs", "docs/runbooks"]

        svc = new_service(rng, "Paging API")
        svc.actions.append(Action("pages", "PG", {"incident_id": "int", "team": "key"},
                                  "page the on-call of a team about an incident"))
        expected = [f"{iid} " + svc.ticket("pages", {"incident_id": iid,
                                                     "team": owner[comp_of[c]]})
                    for iid, c in targets]
        col = "service" if heldout else "component"
        db = build_db([(f"CREATE TABLE incidents (id INTEGER PRIMARY KEY, {col} TEXT, "
                        "severity INTEGER, status TEXT, opened TEXT)")], {"incidents": incidents})
        howto = ("docs/aliases.md maps the incident's service alias to a component and "
                 "docs/ownership.md names the component's owning team" if heldout else
                 "the component's runbook in docs/runbooks names its owning team")
        instruction = (
            "Page the owning team of every open severity-1 incident in shop.db (table "
            f"incidents; {howto}). Pages go through the API (service.py, {svc.url()}): "
            'POST /pages with JSON {"incident_id": ID, "team": TEAM}. Write one line '
            "'INCIDENT_ID PAGE_ID' per page to pages.txt.")

        sol = [prep_line(doc_dirs), *start_lines(svc), sql_line(
            f"SELECT id, {col} FROM incidents WHERE severity = 1 AND status = 'open' "
            "ORDER BY id", f"{WORK}/open.txt")]
        for i in range(1, len(targets) + 1):
            comp = field_expr(f"{WORK}/open.txt", i, 2)
            if heldout:
                sol.append(f"grep -h \"alias \\`{comp}\\`\" docs/aliases.md | "
                           f"sed 's/.*component //' > {WORK}/comp_{i}.txt")
                sol.append(f"grep -h \"^| $(cat {WORK}/comp_{i}.txt) |\" docs/ownership.md | "
                           f"cut -d'|' -f3 | tr -d ' ' > {WORK}/team_{i}.txt")
            else:
                sol.append(f"grep -h '^Owning team:' docs/runbooks/{comp}.md | head -n 1 | "
                           f"sed 's/^[^:]*: *//' > {WORK}/team_{i}.txt")
            iid_x = field_expr(f"{WORK}/open.txt", i, 1)
            sol.append(post_line(svc, "pages", {"incident_id": iid_x,
                                                "team": f"$(cat {WORK}/team_{i}.txt)"},
                                 "pages.txt", label=iid_x))
        return build_card(type(self), difficulty=difficulty, variant=variant,
                          instruction=instruction, workspace={"shop.db": db, **docs}, svc=svc,
                          solution=sol, answer="pages.txt", expected=expected,
                          faults=pick_fault(rng, doc_dirs[-1]) if variant == "fault" else [],
                          infeasible_reason=reason)
