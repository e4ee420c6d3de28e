"""multi_tool/restock: database -> supplier API -> reorder policy -> purchase-order API.

Every product in ``shop.db`` whose stock is *below* its reorder point gets a purchase order
of whole supplier packs that brings the stock to at least ``multiplier x reorder point``
(``docs/purchasing/reorder-policy.md``); the supplier and pack size come from the
service (``GET /suppliers/SKU``); ``po.txt`` gets one ``SKU PO_ID`` line per order.
Decoys: products exactly at their reorder point (not below), a superseded policy.

- difficulty 1/2/3: 1 / 4 / 14 products to reorder (short / medium / long);
- heldout: the multiplier depends on the product's category (a table in
  ``docs/purchasing/categories.md``), one more hop per product;
- fault: see :func:`._kit.pick_fault`;
- infeasible: one product to reorder has no supplier (the API answers 404) and the policy
  allows no other source.
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
    get_line,
    pick_fault,
    post_line,
    prep_line,
    sql_line,
    start_lines,
)
from ._service import Action, new_service

CATEGORIES = ("tools", "garden", "kitchen", "toys", "office", "sports", "lighting", "bath")
LOW = {1: 1, 2: 4, 3: 14}


@register
class Restock(Template):
    family = "multi_tool"
    name = "restock"
    summary = "low-stock products in the db -> supplier API -> reorder policy -> purchase orders"
    difficulties = (1, 2, 3)
    horizons: ClassVar[dict[int, str]] = {1: "short", 2: "medium", 3: "long"}
    tags = ("sql", "search", "http", "arithmetic")

    def generate(self, rng: random.Random, difficulty: int, variant: Variant) -> TaskCard:
        k = LOW[difficulty]
        by_category, infeasible = variant == "heldout", variant == "infeasible"
        n = k + 4 + k // 2
        skus = [f"{rng.choice('ABCDEFGHJKLMNPQRSTUVWXYZ')}{rng.choice('ABCDEFGHJKLMNPQRSTUVWXYZ')}"
                f"-{num}" for num in rng.sample(range(1000, 9999), n)]
        cats = rng.sample(CATEGORIES, 4)
        products = []
        for i, sku in enumerate(skus):
            rp = rng.randint(5, 60)
            if i < k:
                stock = rng.randint(0, rp - 1)
            elif i < k + 2:
                stock = rp  # at the reorder point: not below it
            else:
                stock = rng.randint(rp + 1, rp + 80)
            products.append((sku, f"item {i}", rng.choice(cats), stock, rp))
        rng.shuffle(products)
        low = sorted((p for p in products if p[3] < p[4]), key=lambda p: p[0])
        suppliers = {p[0]: {"sku": p[0], "supplier": f"SUP-{rng.randint(10, 99)}",
                            "pack_size": rng.choice([5, 6, 10, 12, 24, 25])} for p in products}
        mult = rng.choice([2, 3])
        cat_mult = {c: rng.choice([2, 3, 4]) for c in cats}
        reason = None
        if infeasible:
            gone = low[0][0]
            del suppliers[gone]
            reason = f"product {gone} has no supplier and the policy allows no other source"

        def qty(p: tuple) -> int:
            m = cat_mult[p[2]] if by_category else mult
            s = suppliers.get(p[0], {"pack_size": 1})["pack_size"]
            return -(-(m * p[4] - p[3]) // s) * s

        svc = new_service(rng, "Purchasing API")
        svc.lookups["suppliers"] = suppliers
        svc.lookup_nouns["suppliers"] = "sku"
        svc.actions.append(Action("purchase-orders", "PO",
                                  {"sku": "key", "supplier": "key", "quantity": "int"},
                                  "order a quantity of a product from its supplier"))
        expected = [f"{p[0]} " + svc.ticket("purchase-orders", {
            "sku": p[0], "supplier": suppliers.get(p[0], {"supplier": "?"})["supplier"],
            "quantity": qty(p)}) for p in low]

        docs = filler_docs(rng)
        rule = ("the multiplier of the product's category in docs/purchasing/categories.md"
                if by_category else f"Reorder multiplier: {mult}")
        docs["docs/purchasing/reorder-policy.md"] = (
            "# Reorder policy\n\nA product is reordered when its stock is below (not at) its "
            "reorder point. Order whole packs from the product's supplier (the purchasing API,"
            " GET /suppliers/SKU, gives the supplier and the pack size); there is no other "
            "supplier. Order the fewest packs that bring the stock to at least\n"
            "multiplier x reorder point.\n\n" + ("The multiplier is " + rule + ".\n"
                                                 if by_category else rule + "\n"))
        docs["docs/purchasing/old-policy.md"] = (
            "# Reorder policy (superseded in 2022)\n\nReorder multiplier: 1.5\n")
        if by_category:
            docs["docs/purchasing/categories.md"] = (
                "# Category multipliers\n\n| category | multiplier |\n|---|---|\n"
                + "".join(f"| {c} | {cat_mult[c]} |\n" for c in sorted(cats)))
        doc_dirs = ["docs", "docs/purchasing"]
        db = build_db([("CREATE TABLE products (sku TEXT PRIMARY KEY, name TEXT, category TEXT,"
                        " stock INTEGER, reorder_point INTEGER)")], {"products": products})
        instruction = (
            "Reorder every product in shop.db whose stock is below its reorder point, "
            "following docs/purchasing/reorder-policy.md. The purchasing API (service.py, "
            f"{svc.url()}) gives each product's supplier and pack size (GET /suppliers/SKU) "
            'and takes orders: POST /purchase-orders with JSON {"sku": SKU, "supplier": '
            'SUPPLIER, "quantity": N}. Write one line \'SKU PO_ID\' per order to po.txt.')

        sol = [prep_line(doc_dirs), *start_lines(svc), sql_line(
            "SELECT sku, stock, reorder_point, category FROM products "
            "WHERE stock < reorder_point ORDER BY sku", f"{WORK}/low.txt")]
        if not by_category:
            sol.append(f"grep -h '^Reorder multiplier:' docs/purchasing/reorder-policy.md | "
                       f"grep -o '[0-9][0-9]*' > {WORK}/mult.txt")
        for i in range(1, k + 1):
            sku = field_expr(f"{WORK}/low.txt", i, 1)
            sol.append(get_line(svc, "suppliers", sku, "r['supplier'], r['pack_size']",
                                f"{WORK}/sup_{i}.txt"))
            if by_category:
                cat = field_expr(f"{WORK}/low.txt", i, 4)
                sol.append(f'grep -h "^| {cat} |" docs/purchasing/categories.md | '
                           f"cut -d'|' -f3 | tr -d ' ' > {WORK}/mult_{i}.txt")
            mx = f"$(cat {WORK}/mult_{i}.txt)" if by_category else f"$(cat {WORK}/mult.txt)"
            st_x, rp_x = field_expr(f"{WORK}/low.txt", i, 2), field_expr(f"{WORK}/low.txt", i, 3)
            pack = field_expr(f"{WORK}/sup_{i}.txt", 1, 2)
            quantity = f"$(( ( {mx} * {rp_x} - {st_x} + {pack} - 1 ) / {pack} * {pack} ))"
            sol.append(post_line(svc, "purchase-orders", {
                "sku": sku, "supplier": field_expr(f"{WORK}/sup_{i}.txt", 1, 1),
                "quantity": quantity}, "po.txt", label=sku))
        return build_card(type(self), difficulty=difficulty, variant=variant,
                          instruction=instruction, workspace={"shop.db": db, **docs}, svc=svc,
                          solution=sol, answer="po.txt", expected=expected,
                          faults=pick_fault(rng, doc_dirs[-1]) if variant == "fault" else [],
                          infeasible_reason=reason)
