"""multi_tool/refund-top-customer: database -> documents -> API.

Find the top customers in ``shop.db`` (by delivered orders; ties to the lower id), look up
each one's region's refund rate in ``docs/``, file one refund per customer through the API,
and write the tickets to ``answer.txt``. Decoys: cancelled and returned orders (counting
every order gives another ranking) and an archived, superseded rate table.

- difficulty 1/2/3: 1 / 4 / 14 customers (short / medium / long);
- heldout: rank by delivered *spend* instead of count, and the rates live in sections of
  one handbook instead of one file per region;
- fault: see :func:`._kit.pick_fault`;
- infeasible: the first customer's region has no refund policy anywhere in ``docs/``.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from typing import ClassVar

from ...cards import TaskCard
from .._registry import Template, Variant, register
from ._kit import (
    WORK,
    build_card,
    build_db,
    field_expr,
    filler_docs,
    name_pool,
    pick_fault,
    post_line,
    prep_line,
    sql_line,
    start_lines,
)
from ._service import Action, new_service

REGIONS = ("north", "south", "east", "west", "central", "coastal", "highland", "lowland",
           "harbor", "valley")
TOP_K = {1: 1, 2: 4, 3: 14}
N_CUSTOMERS = {1: 12, 2: 24, 3: 40}


@register
class RefundTopCustomer(Template):
    family = "multi_tool"
    name = "refund-top-customer"
    summary = "top customers by delivered orders -> region refund rate in docs -> refund API"
    difficulties = (1, 2, 3)
    horizons: ClassVar[dict[int, str]] = {1: "short", 2: "medium", 3: "long"}
    tags = ("sql", "search", "http")

    def generate(self, rng: random.Random, difficulty: int, variant: Variant) -> TaskCard:
        k, n = TOP_K[difficulty], N_CUSTOMERS[difficulty]
        heldout, infeasible = variant == "heldout", variant == "infeasible"
        regions = rng.sample(REGIONS, 6)
        rates = {r: rng.randrange(10, 95, 5) for r in regions}
        names = name_pool(rng, n)
        customers = [(i + 1, names[i], rng.choice(regions)) for i in range(n)]
        orders: list[tuple[int, int, int, str]] = []
        for cid, _, _ in customers:
            for _ in range(rng.randint(0, 9)):
                status = rng.choices(["delivered", "cancelled", "returned"], [6, 2, 1])[0]
                orders.append((len(orders) + 1, cid, rng.randrange(500, 40000), status))
        delivered = [o for o in orders if o[3] == "delivered"]
        if heldout:
            score: dict[int, int] = defaultdict(int)
            for o in delivered:
                score[o[1]] += o[2]
        else:
            score = Counter(o[1] for o in delivered)
        ranked = sorted((c for c in score if score[c] > 0), key=lambda c: (-score[c], c))
        while len(ranked) < k:  # tiny worlds: make sure k customers have delivered orders
            cid = next(c for c, _, _ in customers if c not in ranked)
            orders.append((len(orders) + 1, cid, 100, "delivered"))
            ranked.append(cid)
        top = ranked[:k]
        region_of = {c: r for c, _, r in customers}
        reason = None
        if infeasible:  # the first customer's region loses its policy
            gone = region_of[top[0]]
            reason = f"region {gone!r} has no refund policy in docs/"
            del rates[gone]

        docs = filler_docs(rng)
        docs["docs/archive/refund-rates-2019.md"] = (
            "# Refund rates (2019) - SUPERSEDED, do not use\n\n" + "".join(
                f"- {r}: refund rate {rng.randrange(5, 95, 5)}%\n" for r in regions))
        if heldout:
            sections = [f"## Region: {r}\n\nRefund rate: {rates[r]}% of the order value.\n"
                        f"Refund window: {rng.choice([14, 30, 60])} days.\n"
                        for r in rng.sample(sorted(rates), len(rates))]
            docs["docs/handbook.md"] = ("# Customer service handbook\n\n"
                                        "One section per region.\n\n" + "\n".join(sections))
            doc_dirs = ["docs", "docs/general"]
        else:
            for r in sorted(rates):
                docs[f"docs/policies/{r}.md"] = (
                    f"# Refund policy: {r} region\n\nRefund rate: {rates[r]}% of the order "
                    f"value.\nRefund window: {rng.choice([14, 30, 60])} days.\n")
            doc_dirs = ["docs", "docs/policies"]

        svc = new_service(rng, "Refund desk API")
        svc.actions.append(Action("refunds", "RF", {"customer_id": "int", "percent": "int"},
                                  "file a refund for a customer at the given percent"))
        expected = [svc.ticket("refunds", {"customer_id": c, "percent": rates.get(
            region_of[c], 0)}) for c in top]

        db = build_db(
            ["CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, region TEXT)",
             ("CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER, "
              "amount_cents INTEGER, status TEXT)")],
            {"customers": customers, "orders": orders})
        metric = ("the highest total value (amount_cents) of delivered orders" if heldout
                  else "the most delivered orders")
        where = ("the region's section of docs/handbook.md" if heldout
                 else "docs/policies")
        who = "customer" if k == 1 else f"{k} customers"
        instruction = (
            f"Find the {who} with {metric} in shop.db (only orders with status 'delivered' "
            "count; ties go to the lower customer id). For each, look up the current refund "
            f"rate of the customer's region in {where}, then file a refund through the API "
            f"(service.py, {svc.url()}): POST /refunds with JSON "
            '{"customer_id": ID, "percent": RATE}. '
            "Write each returned ticket id to answer.txt, one per line.")

        agg = "SUM(o.amount_cents)" if heldout else "COUNT(*)"
        sol = [prep_line(doc_dirs), *start_lines(svc), sql_line(
            "SELECT c.id, c.region FROM customers c JOIN orders o ON o.customer_id = c.id "
            f"WHERE o.status = 'delivered' GROUP BY c.id ORDER BY {agg} DESC, c.id LIMIT {k}",
            f"{WORK}/top.txt")]
        for i in range(1, k + 1):
            region = field_expr(f"{WORK}/top.txt", i, 2)
            if heldout:
                src = (f'sed -n "/^## Region: {region}\\$/,/^## /p" docs/handbook.md | '
                       "grep -i 'refund rate'")
            else:
                src = f"grep -i -h 'refund rate' docs/policies/{region}.md"
            sol.append(f"{src} | grep -o '[0-9][0-9]*%' | head -n 1 | tr -d % > "
                       f"{WORK}/pct_{i}.txt")
            sol.append(post_line(svc, "refunds", {
                "customer_id": field_expr(f"{WORK}/top.txt", i, 1),
                "percent": f"$(cat {WORK}/pct_{i}.txt)"}, "answer.txt"))
        return build_card(type(self), difficulty=difficulty, variant=variant,
                          instruction=instruction, workspace={"shop.db": db, **docs}, svc=svc,
                          solution=sol, answer="answer.txt", expected=expected,
                          faults=pick_fault(rng, doc_dirs[-1]) if variant == "fault" else [],
                          infeasible_reason=reason)
