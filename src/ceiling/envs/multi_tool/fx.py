"""multi_tool/fx-settlement: database + rate API + finance docs -> arithmetic -> settlement API.

Every customer with open invoices in ``shop.db`` is settled in US cents: each open invoice
is converted at the rate service's rate (integer arithmetic, round half up, per invoice),
the settlement fee from ``docs/finance/settlement.md`` is deducted, and the net amount is
filed through ``POST /settlements``; ``answer.txt`` gets the tickets. Rates exist only in
the service; the fee only in the docs (an archived, superseded fee is a decoy); paid
invoices are a decoy.

- difficulty 1/2/3: 1 / 3 / 12 customers over 1 / 3 / 4 currencies (short/medium/long);
- heldout: the service quotes the inverse rate (units per US dollar), so the conversion
  divides instead of multiplying;
- fault: see :func:`._kit.pick_fault`;
- infeasible: one open invoice is in a currency the rate service does not know, and the
  docs forbid any other source of rates.
"""

from __future__ import annotations

import random
from typing import ClassVar

from ...cards import TaskCard
from .._common import shq
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

CURRENCIES = ("EUR", "GBP", "CHF", "CAD", "AUD", "SEK", "NOK", "DKK", "NZD", "SGD")
SHAPE = {1: (1, 1), 2: (3, 3), 3: (12, 4)}  # difficulty -> (customers, currencies)
PPM = 1_000_000


def to_cents(amount_minor: int, rate_ppm: int, inverse: bool) -> int:
    """One invoice in US cents, rounded half up (integer arithmetic, as the docs state)."""
    if inverse:
        return (2 * amount_minor * PPM + rate_ppm) // (2 * rate_ppm)
    return (amount_minor * rate_ppm + PPM // 2) // PPM


@register
class FxSettlement(Template):
    family = "multi_tool"
    name = "fx-settlement"
    summary = "open invoices in the db, FX rates from the API, fee from the docs -> settlements"
    difficulties = (1, 2, 3)
    horizons: ClassVar[dict[int, str]] = {1: "short", 2: "medium", 3: "long"}
    tags = ("sql", "search", "http", "arithmetic")

    def generate(self, rng: random.Random, difficulty: int, variant: Variant) -> TaskCard:
        n_cust, n_cur = SHAPE[difficulty]
        inverse, infeasible = variant == "heldout", variant == "infeasible"
        curs = sorted(rng.sample(CURRENCIES, n_cur))
        rates = {c: rng.randint(300_000, 1_500_000) for c in curs}  # USD per unit, ppm
        quoted = {c: round(PPM * PPM / r) if inverse else r for c, r in rates.items()}
        fee_bps = rng.randrange(50, 400, 5)
        customers = sorted(rng.sample(range(1, 60), n_cust + 3))
        settle, only_paid = customers[:n_cust], customers[n_cust:]
        invoices: list[tuple[int, int, str, int, str]] = []
        for cid in settle:
            for j in range(rng.randint(1, 3)):
                cur = curs[(cid + j) % n_cur] if j == 0 else rng.choice(curs)
                invoices.append((0, cid, cur, rng.randint(1000, 900_000), "open"))
            invoices.append((0, cid, rng.choice(curs), rng.randint(1000, 900_000), "paid"))
        for cid in only_paid:
            invoices.append((0, cid, rng.choice(curs), rng.randint(1000, 900_000), "paid"))
        for c in curs:  # every currency appears on at least one open invoice
            if not any(inv[2] == c and inv[4] == "open" for inv in invoices):
                invoices.append((0, rng.choice(settle), c, rng.randint(1000, 900_000), "open"))
        reason = None
        if infeasible:
            unknown = rng.choice([c for c in CURRENCIES if c not in curs])
            invoices.append((0, settle[0], unknown, rng.randint(1000, 900_000), "open"))
            reason = f"open invoices in {unknown}, a currency the rate service does not quote"
        rng.shuffle(invoices)
        invoices = [(i + 1, *inv[1:]) for i, inv in enumerate(invoices)]

        expected_net = {}
        for cid in settle:
            total = sum(to_cents(a, quoted[c], inverse) for _, ci, c, a, s in invoices
                        if ci == cid and s == "open" and c in quoted)
            expected_net[cid] = total - (total * fee_bps + 5000) // 10000

        svc = new_service(rng, "Treasury API")
        field = "units_per_usd_ppm" if inverse else "usd_per_unit_ppm"
        svc.lookups["rates"] = {c: {"currency": c, field: q} for c, q in quoted.items()}
        svc.lookup_nouns["rates"] = "currency"
        svc.actions.append(Action("settlements", "ST",
                                  {"customer_id": "int", "usd_cents": "int"},
                                  "settle a customer's open invoices for a net amount in cents"))
        expected = [svc.ticket("settlements", {"customer_id": c, "usd_cents": expected_net[c]})
                    for c in settle]

        conv = ("cents = (2 * amount_minor * 1000000 + units_per_usd_ppm) // "
                "(2 * units_per_usd_ppm)" if inverse else
                "cents = (amount_minor * usd_per_unit_ppm + 500000) // 1000000")
        docs = filler_docs(rng)
        docs["docs/finance/settlement.md"] = (
            "# Settling customer invoices\n\n"
            "1. Take every invoice with status 'open' (paid invoices are done).\n"
            f"2. Convert each invoice to US cents with the rate from the treasury API "
            f"(GET /rates/CURRENCY, field {field}), rounding half up in integer arithmetic:\n"
            f"   `{conv}`.\n"
            "   No other source of exchange rates may be used.\n"
            "3. Add the invoices of the customer up: that is the gross amount.\n"
            f"4. Deduct the settlement fee: fee = (gross * FEE_BPS + 5000) // 10000.\n\n"
            f"Settlement fee: {fee_bps} basis points\n")
        docs["docs/finance/archive-2021.md"] = (
            f"# Old fee schedule (superseded)\n\nSettlement fee was {fee_bps + 75} basis "
            "points until 2021.\n")
        doc_dirs = ["docs", "docs/finance"]
        db = build_db([("CREATE TABLE invoices (id INTEGER PRIMARY KEY, customer_id INTEGER, "
                        "currency TEXT, amount_minor INTEGER, status TEXT)")],
                      {"invoices": invoices})
        who = "the customer" if n_cust == 1 else "every customer"
        instruction = (
            f"Settle {who} with open invoices in shop.db (table invoices; amounts in minor "
            "units). docs/finance/settlement.md says how: convert with the treasury API's "
            f"rates (service.py, {svc.url()}, GET /rates/CURRENCY) and deduct the settlement "
            'fee. File each settlement with POST /settlements and JSON {"customer_id": ID, '
            '"usd_cents": NET} and write the returned ticket ids to answer.txt, one per line.')

        sol = [prep_line(doc_dirs), *start_lines(svc),
               sql_line("SELECT customer_id, currency, amount_minor FROM invoices "
                        "WHERE status = 'open' ORDER BY customer_id, id", f"{WORK}/inv.txt"),
               (f"grep -h '^Settlement fee:' docs/finance/settlement.md | "
                f"grep -o '[0-9][0-9]*' > {WORK}/fee.txt")]
        for j in range(1, n_cur + 1):
            cur = f"$(cut -d' ' -f2 {WORK}/inv.txt | sort -u | sed -n {j}p)"
            sol.append(get_line(svc, "rates", cur, f"r['currency'], r[{field!r}]",
                                f"{WORK}/rate_{j}.txt"))
        compute = (
            "import glob,sys; i=int(sys.argv[1]); "
            "rates=dict(open(f).read().split() for f in glob.glob('work/rate_*.txt')); "
            "rows=[r.split() for r in open('work/inv.txt') if r.strip()]; "
            "cust=sorted({int(r[0]) for r in rows})[i-1]; "
            + ("conv=lambda a,q: (2*a*1000000+q)//(2*q); " if inverse else
               "conv=lambda a,q: (a*q+500000)//1000000; ")
            + "g=sum(conv(int(a),int(rates[c])) for ci,c,a in rows if int(ci)==cust); "
            "fee=int(open('work/fee.txt').read()); print(cust, g-(g*fee+5000)//10000)")
        for i in range(1, n_cust + 1):
            sol.append(f"python3 -c {shq(compute)} {i} > {WORK}/net_{i}.txt")
            sol.append(post_line(svc, "settlements", {
                "customer_id": field_expr(f"{WORK}/net_{i}.txt", 1, 1),
                "usd_cents": field_expr(f"{WORK}/net_{i}.txt", 1, 2)}, "answer.txt"))
        return build_card(type(self), difficulty=difficulty, variant=variant,
                          instruction=instruction, workspace={"shop.db": db, **docs}, svc=svc,
                          solution=sol, answer="answer.txt", expected=expected,
                          faults=pick_fault(rng, doc_dirs[-1]) if variant == "fault" else [],
                          infeasible_reason=reason)
