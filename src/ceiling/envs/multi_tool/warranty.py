"""multi_tool/warranty-claims: database (dates) -> product manuals -> decisions API.

Each open warranty claim in ``shop.db`` is approved when it was filed within the product's
warranty (``filed - purchased <= warranty days``, from the product's manual under
``docs/manuals/``) and rejected otherwise; decisions go through ``POST /decisions`` and
``decisions.txt`` gets one ``CLAIM_ID DECISION_ID`` line per claim. Decoys: decided claims,
an "extended warranty (sold separately)" line in every manual; the generator puts claims
on both sides of the limit, some exactly on it.

- difficulty 1/2/3: 1 / 4 / 14 open claims (short / medium / long);
- heldout: manuals name the product's category; the warranty per category is a table in
  ``docs/warranty.md`` (one more hop per claim);
- fault: see :func:`._kit.pick_fault`;
- infeasible: the product of one open claim has no manual (no warranty is documented).
"""

from __future__ import annotations

import datetime as dt
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

OPEN = {1: 1, 2: 4, 3: 14}
CATEGORIES = ("appliance", "audio", "phone", "tool", "toy", "furniture")
WORDS = ("kettle", "blender", "speaker", "drill", "lamp", "router", "camera", "heater",
         "mixer", "fan", "scale", "clock", "radio", "iron", "toaster", "grill")


@register
class WarrantyClaims(Template):
    family = "multi_tool"
    name = "warranty-claims"
    summary = "open claims in the db -> warranty days in the manuals -> decisions API"
    difficulties = (1, 2, 3)
    horizons: ClassVar[dict[int, str]] = {1: "short", 2: "medium", 3: "long"}
    tags = ("sql", "search", "http", "dates")

    def generate(self, rng: random.Random, difficulty: int, variant: Variant) -> TaskCard:
        k = OPEN[difficulty]
        by_category, infeasible = variant == "heldout", variant == "infeasible"
        products = sorted({f"{rng.choice(WORDS)}-{rng.randint(100, 999)}" for _ in range(k + 6)})
        cat_days = {c: rng.choice([90, 180, 365, 730]) for c in CATEGORIES}
        category = {p: rng.choice(CATEGORIES) for p in products}
        days = {p: cat_days[category[p]] if by_category else rng.choice([30, 90, 180, 365, 730])
                for p in products}
        orders, claims = [], []
        claim_id = rng.randint(500, 900)
        n_claims = k + 3 + k // 2
        for i in range(n_claims):
            p = rng.choice(products)
            bought = dt.date(2023, 1, 1) + dt.timedelta(days=rng.randint(0, 500))
            age = days[p] + rng.choice([-40, -5, 0, 0, 1, 3, 60])  # both sides of the limit
            orders.append((i + 1, rng.randint(1, 200), p, bought.isoformat()))
            claim_id += rng.randint(1, 5)
            claims.append((claim_id, i + 1, (bought + dt.timedelta(days=max(age, 1))).isoformat(),
                           "open" if i < k else "decided"))
        rng.shuffle(claims)
        sku_of = {o[0]: o[2] for o in orders}
        age_of = {c[0]: (dt.date.fromisoformat(c[2])
                         - dt.date.fromisoformat(orders[c[1] - 1][3])).days for c in claims}
        open_claims = sorted(c for c in claims if c[3] == "open")
        documented = set(products)
        reason = None
        if infeasible:
            gone = sku_of[open_claims[0][1]]
            documented.discard(gone)
            reason = f"product {gone} has no manual, so its warranty is unknown"

        svc = new_service(rng, "Claims API")
        svc.actions.append(Action("decisions", "DC",
                                  {"claim_id": "int", "decision": "enum:approve|reject"},
                                  "approve or reject a warranty claim"))
        expected = []
        for c in open_claims:
            ok = age_of[c[0]] <= days[sku_of[c[1]]]
            expected.append(f"{c[0]} " + svc.ticket("decisions", {
                "claim_id": c[0], "decision": "approve" if ok else "reject"}))

        docs = filler_docs(rng)
        for p in sorted(documented):
            body = (f"Category: {category[p]}\n" if by_category
                    else f"Warranty: {days[p]} days from the purchase date.\n")
            docs[f"docs/manuals/{p}.md"] = (
                f"# Manual: {p}\n\nUnpack the device and charge it fully before first use.\n"
                + body + f"Extended warranty (sold separately): {days[p] + 365} days.\n")
        if by_category:
            docs["docs/warranty.md"] = (
                "# Warranty by category\n\n| category | days |\n|---|---|\n"
                + "".join(f"| {c} | {cat_days[c]} |\n" for c in sorted(CATEGORIES)))
        docs["docs/claims-process.md"] = (
            "# Handling warranty claims\n\nA claim is approved when it was filed at most the "
            "warranty's number of days after the purchase (filed - purchased <= days); "
            "otherwise it is rejected. The extended warranty does not apply unless the "
            "customer bought it (none of the open claims did).\n")
        doc_dirs = ["docs", "docs/manuals"]
        db = build_db([
            ("CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER, sku TEXT, "
            "purchased TEXT)"),
            ("CREATE TABLE claims (id INTEGER PRIMARY KEY, order_id INTEGER, filed TEXT, "
            "status TEXT)")], {"orders": orders, "claims": claims})
        where = ("its manual in docs/manuals names the product's category and docs/warranty.md"
                 " the warranty days per category" if by_category
                 else "the product's manual in docs/manuals gives the warranty")
        instruction = (
            "Decide every open warranty claim in shop.db (tables claims and orders): approve it"
            " when it was filed within the product's warranty, otherwise reject it "
            f"({where}; docs/claims-process.md has the rule). Send each decision to the "
            f"claims API (service.py, {svc.url()}): POST /decisions with JSON "
            '{"claim_id": ID, "decision": "approve" or "reject"}. Write one line '
            "'CLAIM_ID DECISION_ID' per claim to decisions.txt.")

        sol = [prep_line(doc_dirs), *start_lines(svc), sql_line(
            "SELECT c.id, o.sku, CAST(julianday(c.filed) - julianday(o.purchased) AS INTEGER) "
            "FROM claims c JOIN orders o ON o.id = c.order_id WHERE c.status = 'open' "
            "ORDER BY c.id", f"{WORK}/claims.txt")]
        for i in range(1, k + 1):
            cid_x = field_expr(f"{WORK}/claims.txt", i, 1)
            sku = field_expr(f"{WORK}/claims.txt", i, 2)
            age_x = field_expr(f"{WORK}/claims.txt", i, 3)
            if by_category:
                sol.append(f"grep -h '^Category:' docs/manuals/{sku}.md | sed 's/^[^:]*: *//' > "
                           f"{WORK}/cat_{i}.txt")
                sol.append(f'grep -h "^| $(cat {WORK}/cat_{i}.txt) |" docs/warranty.md | '
                           f"cut -d'|' -f3 | tr -d ' ' > {WORK}/days_{i}.txt")
            else:
                sol.append(f"grep -h '^Warranty:' docs/manuals/{sku}.md | grep -o '[0-9][0-9]*'"
                           f" | head -n 1 > {WORK}/days_{i}.txt")
            decision = (f"$(if [ {age_x} -le $(cat {WORK}/days_{i}.txt) ]; then echo approve; "
                        "else echo reject; fi)")
            sol.append(post_line(svc, "decisions", {"claim_id": cid_x, "decision": decision},
                                 "decisions.txt", label=cid_x))
        return build_card(type(self), difficulty=difficulty, variant=variant,
                          instruction=instruction, workspace={"shop.db": db, **docs}, svc=svc,
                          solution=sol, answer="decisions.txt", expected=expected,
                          faults=pick_fault(rng, doc_dirs[-1]) if variant == "fault" else [],
                          infeasible_reason=reason)
