"""Seeded extraction cases for ``structgen bench values``: a record, a short text that states it, a schema.

:func:`make_cases` draws ``n`` cases from ``seed``.  Every case is one record of one of six kinds,
drawn from pools of names, cities, companies, products, dates and numbers with
``random.Random``; the source text states each of the record's fields in prose (several sentence
templates per field, the sentences in random order, plus one to three distractor sentences that
mention *other* values of the same types: a former employer, last year's venue, a cancelled
booking...), and the request asks the model to extract the record as JSON.

The contract of the benchmark (checked by ``tests/bench/test_values.py`` on many seeds):

* every expected free string value is a span of the text, exactly as written (so grounded
  extraction -- strings restricted to spans of the source -- can reach every answer); enum values
  appear ignoring case (``"fahrenheit"`` is written "Fahrenheit" in prose); every expected number
  appears written out in digits; dates are written in ISO form (``2025-03-14``) so no date
  arithmetic is needed;
* the expected record validates against the case's schema;
* a field the text does not state is not in the expected record (optional fields are dropped at
  random; a distractor may still mention a value of the same type, which must not be extracted);
* texts stay under 150 words (a 135M model's attention is the limit).

Kinds (:data:`KINDS`) and the schema features they exercise:

``contact``   ``format: email``, a ``pattern`` (phone), a nested object (address), open
              ``additionalProperties`` (omitted), two required fields of six;
``order``     ``pattern`` (order id, SKU), integer and number fields with ``minimum``, an ``enum``
              (currency), a nested object with its own ``enum`` and ``required``,
              ``additionalProperties: false``;
``event``     ``format: date``, a time ``pattern``, an ``enum``, an array of strings, a nested
              object, integer ``minimum``;
``book``      an array of strings with ``minItems``, integer range, ISBN ``pattern``, an ``enum`` with
              a multi-word value, an optional nested object;
``flight``    an array of objects (segments, in order), IATA ``pattern``s, ``format: date`` and
              ``email``, a closed nested object, an ``enum``, a bounded integer;
``tool_call`` the arguments of one of four tools (``get_weather(city, unit, days)``,
              ``book_table(...)``, ``convert_currency(...)``, ``send_email(...)``) from a user's
              message: closed argument objects, ``enum``, ``format``, ``pattern``, an array of emails.

Determinism: case ``i`` of seed ``s`` depends only on ``(s, i)`` (``make_cases(6, s)`` is a prefix
of ``make_cases(30, s)``), and every block of six consecutive cases holds each kind once, in an
order drawn from the seed.
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
import random
from typing import Any, Callable

from .values_records import (  # noqa: F401 - SCHEMAS re-exported
    FIRST, LAST, CITIES, COMPANIES, JOB_TITLES, PRODUCTS, CURRENCIES, EVENT_PREFIX, EVENT_TOPICS, EVENT_TYPES,
    VENUES, TITLE_ADJ, TITLE_NOUN, PUBLISHERS, GENRES, AIRPORTS, AIRLINES, CABINS, RESTAURANTS,
    TOOL_CURRENCIES, SUBJECTS, DATE0, TOOL_SCHEMAS, SCHEMAS,
)

__all__ = ["Case", "KINDS", "SCHEMAS", "make_cases", "make_case"]


@dataclasses.dataclass(frozen=True)
class Case:
    """One extraction case: ``request`` (what the user sends, ``text`` inside it), ``schema``,
    ``expected`` (the record the text states; fields not stated are absent)."""

    id: str
    kind: str
    schema_name: str
    schema: dict
    text: str
    request: str
    expected: dict

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


# --------------------------------------------------------------------------- helpers


def _other(rng: random.Random, pool: list, *exclude: Any) -> Any:
    """A pool item that is none of ``exclude``."""
    choices = [x for x in pool if x not in exclude]
    return rng.choice(choices)


def _date(rng: random.Random) -> str:
    return (DATE0 + _dt.timedelta(days=rng.randrange(0, 1460))).isoformat()


def _time(rng: random.Random) -> str:
    return f"{rng.randrange(7, 22):02d}:{rng.choice([0, 15, 30, 45]):02d}"


def _person(rng: random.Random) -> tuple[str, str]:
    return rng.choice(FIRST), rng.choice(LAST)


def _email(rng: random.Random, first: str, last: str, domain: str) -> str:
    local = rng.choice([f"{first}.{last}", f"{first[0]}{last}", f"{first}", f"{first}_{last}", f"{last}.{first[0]}"])
    return f"{local.lower()}@{domain}"


def _phone(rng: random.Random) -> str:
    d = lambda k: "".join(str(rng.randrange(10)) for _ in range(k))  # noqa: E731
    return rng.choice([
        lambda: f"+{rng.choice([1, 44, 33, 49, 81, 351, 34, 61, 91, 254])} {rng.randrange(2, 10)}{d(2)} {d(3)} {d(4)}",
        lambda: f"({rng.randrange(2, 10)}{d(2)}) {d(3)}-{d(4)}",
        lambda: f"+{rng.choice([1, 44, 49, 351])}-{rng.randrange(2, 10)}{d(2)}-{d(3)}-{d(4)}",
    ])()


def _join(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _pick(rng: random.Random, *templates: str, **values: Any) -> str:
    return rng.choice(templates).format(**values)


def _compose(rng: random.Random, intro: list[str], body: list[list[str]], distractors: list[str],
             k: tuple[int, int] = (1, 2)) -> str:
    """The intro sentences, then the body blocks (each a list of sentences kept together, in order)
    and ``k`` distractors, shuffled."""
    blocks = [b for b in body if b] + [[s] for s in rng.sample(distractors, min(len(distractors),
                                                                                rng.randint(*k)))]
    rng.shuffle(blocks)
    return " ".join(intro + [s for b in blocks for s in b])


def _price(rng: random.Random, lo: int, hi: int, currency: str) -> float | int:
    if currency == "JPY":
        return rng.randint(lo, hi) * 100
    return round(rng.randint(lo, hi) + rng.choice([0.0, 0.5, 0.99, 0.49, 0.95, 0.25]), 2)


def _fmt_price(v: float | int) -> str:
    return str(v) if isinstance(v, int) else f"{v:.2f}"


# --------------------------------------------------------------------------- kinds


def _contact(rng: random.Random) -> tuple[str, dict, str, str]:
    first, last = _person(rng)
    name = f"{first} {last}"
    company, domain = rng.choice(COMPANIES)
    rec: dict[str, Any] = {"name": name, "email": _email(rng, first, last, domain)}
    has = {k: rng.random() < p for k, p in (("phone", 0.7), ("company", 0.75), ("job_title", 0.7),
                                             ("address", 0.7))}
    city, country = rng.choice(CITIES)
    intro = [_pick(rng, "Meet {n}.", "This note is about {n}.", "{n} reached out to us last week.",
                   "Contact card: {n}.", n=name)]
    body: list[list[str]] = [[_pick(rng, "You can email {f} at {e}.", "{f}'s email address is {e}.",
                                    "Write to {e} to reach {f}.", f=first, e=rec["email"])]]
    if has["phone"]:
        rec["phone"] = _phone(rng)
        body.append([_pick(rng, "{f}'s phone number is {p}.", "Call {p} to speak with {f}.",
                           "The best number to reach {f} is {p}.", f=first, p=rec["phone"])])
    if has["company"] and has["job_title"]:
        rec["company"], rec["job_title"] = company, rng.choice(JOB_TITLES)
        body.append([_pick(rng, "{f} works at {c} as {a} {j}.", "{f} is the {j} at {c}.",
                           "At {c}, {f} holds the role of {j}.", f=first, c=company, j=rec["job_title"],
                           a="an" if rec["job_title"][0] in "aeio" else "a")])
    elif has["company"]:
        rec["company"] = company
        body.append([_pick(rng, "{f} works at {c}.", "{f} is employed by {c}.", f=first, c=company)])
    elif has["job_title"]:
        rec["job_title"] = rng.choice(JOB_TITLES)
        body.append([_pick(rng, "{f}'s job title is {j}.", "{f} currently works as {a} {j}.", f=first,
                           j=rec["job_title"], a="an" if rec["job_title"][0] in "aeio" else "a")])
    if has["address"]:
        if rng.random() < 0.7:
            rec["address"] = {"city": city, "country": country}
            body.append([_pick(rng, "{f} is based in {c}, {k}.", "{f}'s office is in {c} ({k}).",
                               "These days {f} lives in {c}, {k}.", f=first, c=city, k=country)])
        else:
            rec["address"] = {"city": city}
            body.append([_pick(rng, "{f} lives in {c}.", "{f} is based in {c}.", f=first, c=city)])
    o_first, o_last = _person(rng)
    distractors = [
        f"{first} previously worked at {_other(rng, [c for c, _ in COMPANIES], company)}.",
        f"{first} used to live in {_other(rng, [c for c, _ in CITIES], city)}.",
        f"{first}'s colleague {o_first} {o_last} was also at the meeting.",
        "The meeting was friendly and short.",
    ]
    return "contact", rec, _compose(rng, intro, body, distractors), "Extract the contact from this text:\n\n{text}"


def _order(rng: random.Random) -> tuple[str, dict, str, str]:
    product, (lo, hi), prefix = rng.choice(PRODUCTS)
    currency = rng.choice(CURRENCIES)
    rec: dict[str, Any] = {"order_id": f"ORD-{rng.randrange(10000, 100000)}", "product": product,
                           "quantity": rng.randint(1, 12), "unit_price": _price(rng, lo, hi, currency),
                           "currency": currency}
    intro = [_pick(rng, "Order {o} was received today.", "Here are the details of order {o}.",
                   "Confirmation for order {o}.", o=rec["order_id"])]
    q = rec["quantity"]
    if rng.random() < 0.6:
        rec["sku"] = f"{prefix}-{rng.randrange(1000, 10000)}"
        line = _pick(rng, "The line item is {p} (SKU {s}), quantity {q}.",
                     "The customer wants {q} of the {p}, item code {s}.",
                     "Quantity ordered: {q}. Product: {p}, SKU {s}.", p=product, s=rec["sku"], q=q)
    else:
        line = _pick(rng, "The line item is {p}, quantity {q}.", "The customer wants {q} of the {p}.",
                     "Quantity ordered: {q}. Product: {p}.", p=product, q=q)
    p = _fmt_price(rec["unit_price"])
    body = [[line], [_pick(rng, "The unit price is {p} {c}.", "Each one costs {c} {p}.",
                           "They are priced at {p} {c} apiece.", p=p, c=currency)]]
    if rng.random() < 0.7:
        first, last = _person(rng)
        rec["customer"] = f"{first} {last}"
        body.append([_pick(rng, "The order was placed by {n}.", "The customer is {n}.", "{n} placed it online.",
                           n=rec["customer"])])
    if rng.random() < 0.3:
        rec["discount_percent"] = rng.choice([5, 10, 15, 20, 25, 30])
        body.append([f"A {rec['discount_percent']}% discount applies to this line."])
    if rng.random() < 0.7:
        method = rng.choice(["standard", "express", "pickup"])
        city = rng.choice(CITIES)[0]
        rec["shipping"] = {"method": method}
        if rng.random() < 0.7:
            rec["shipping"]["city"] = city
            s = {"standard": ["It goes by standard shipping to {c}.", "Shipping: standard, to {c}."],
                 "express": ["It ships by express delivery to {c}.", "Shipping: express, to {c}."],
                 "pickup": ["The customer chose store pickup in {c}.", "Shipping: pickup at the {c} store."]}
        else:
            s = {"standard": ["It goes by standard shipping.", "Shipping method: standard."],
                 "express": ["It ships by express delivery.", "Shipping method: express."],
                 "pickup": ["The customer chose store pickup.", "Shipping method: pickup."]}
        body.append([rng.choice(s[method]).format(c=city)])
    other = _other(rng, [x[0] for x in PRODUCTS], product)
    distractors = [
        f"Their previous order, ORD-{rng.randrange(10000, 100000)}, arrived last month.",
        f"The customer also asked about the {other}, which is out of stock.",
        f"Delivery usually takes {rng.randint(2, 6)} business days.",
        "Please keep the receipt for returns.",
    ]
    return "order", rec, _compose(rng, intro, body, distractors), "Extract the order line from this text:\n\n{text}"


def _event(rng: random.Random) -> tuple[str, dict, str, str]:
    name = " ".join(w for w in (rng.choice(EVENT_PREFIX), rng.choice(EVENT_TOPICS), rng.choice(EVENT_TYPES)) if w)
    city = rng.choice(CITIES)[0]
    rec: dict[str, Any] = {"name": name, "date": _date(rng), "location": {"city": city}}
    if rng.random() < 0.7:
        rec["location"]["venue"] = rng.choice(VENUES)
        where = f"at the {rec['location']['venue']} in {city}"
    else:
        where = f"in {city}"
    intro = [_pick(rng, "The {n} will take place on {d} {w}.", "Save the date: the {n} is on {d} {w}.",
                   "On {d}, the {n} comes to town, {w}.", n=name, d=rec["date"], w=where)]
    body: list[list[str]] = []
    if rng.random() < 0.7:
        rec["start_time"] = _time(rng)
        body.append([_pick(rng, "Doors open at {t}.", "It starts at {t}.", "The programme begins at {t}.",
                           t=rec["start_time"])])
    if rng.random() < 0.6:
        rec["organizer"] = rng.choice(COMPANIES)[0]
        body.append([_pick(rng, "It is organised by {o}.", "{o} is hosting it.", "The organizer is {o}.",
                           o=rec["organizer"])])
    if rng.random() < 0.6:
        rec["format"] = rng.choice(["in-person", "online", "hybrid"])
        body.append([{"in-person": "It is an in-person event only.", "online": "The event is streamed online.",
                      "hybrid": "The format is hybrid, so remote attendance is possible."}[rec["format"]]])
    if rng.random() < 0.6:
        rec["speakers"] = [" ".join(_person(rng)) for _ in range(rng.randint(1, 3))]
        if len(set(rec["speakers"])) < len(rec["speakers"]):
            rec["speakers"] = sorted(set(rec["speakers"]))
        body.append([_pick(rng, "Speakers include {s}.", "The talks will be given by {s}.",
                           "On stage: {s}.", s=_join(rec["speakers"]))])
    if rng.random() < 0.5:
        rec["capacity"] = rng.choice([30, 50, 80, 120, 150, 200, 300, 500, 800, 1200, 2000])
        body.append([_pick(rng, "There is room for {c} attendees.", "Capacity is limited to {c} people.",
                           c=rec["capacity"])])
    o_first, o_last = _person(rng)
    distractors = [
        f"Last year's edition took place in {_other(rng, [c for c, _ in CITIES], city)}.",
        f"Registration closes on {_date(rng)}.",
        f"A networking reception follows at {_time(rng)}.",
        f"{o_first} {o_last} moderated the panel last year.",
    ]
    return "event", rec, _compose(rng, intro, body, distractors), "Extract the event from this text:\n\n{text}"


def _book(rng: random.Random) -> tuple[str, dict, str, str]:
    adj, noun = rng.choice(TITLE_ADJ), rng.choice(TITLE_NOUN)
    title = rng.choice([f"The {adj} {noun}", f"{adj} {noun}", f"The {noun} of {rng.choice(CITIES)[0]}"])
    authors = list(dict.fromkeys(" ".join(_person(rng)) for _ in range(rng.choice([1, 1, 1, 2]))))
    rec: dict[str, Any] = {"title": title, "authors": authors}
    has_genre = rng.random() < 0.7
    if has_genre:
        rec["genre"] = rng.choice(GENRES)
        intro = [_pick(rng, '"{t}" is a {g} book by {a}.', 'Written by {a}, "{t}" is a work of {g}.',
                       '{a} wrote "{t}", a {g} title.', t=title, g=rec["genre"], a=_join(authors))]
    else:
        intro = [_pick(rng, '"{t}" is a book by {a}.', 'Written by {a}, "{t}" is out now.',
                       '{a} wrote "{t}".', t=title, a=_join(authors))]
    body: list[list[str]] = []
    year = rng.randint(1950, 2024)
    publisher = rng.choice(PUBLISHERS)
    has_year, has_pub = rng.random() < 0.8, rng.random() < 0.7
    if has_year:
        rec["year"] = year
    if has_pub:
        rec["publisher"] = publisher
    if has_year and has_pub:
        body.append([_pick(rng, "It was first published in {y} by {p}.", "{p} released it in {y}.", y=year,
                           p=publisher)])
    elif has_year:
        body.append([_pick(rng, "It first came out in {y}.", "The first edition appeared in {y}.", y=year)])
    elif has_pub:
        body.append([_pick(rng, "The publisher is {p}.", "It is published by {p}.", p=publisher)])
    if rng.random() < 0.6:
        rec["isbn"] = (f"978-{rng.randint(0, 1)}-{rng.randrange(1000, 10000)}-{rng.randrange(1000, 10000)}-"
                       f"{rng.randrange(10)}")
        body.append([_pick(rng, "ISBN: {i}.", "Its ISBN is {i}.", i=rec["isbn"])])
    if rng.random() < 0.6:
        rec["pages"] = rng.randint(96, 880)
        body.append([_pick(rng, "The hardcover edition has {n} pages.", "It runs to {n} pages.", n=rec["pages"])])
    if rng.random() < 0.3:
        series = rng.choice([f"{rng.choice(TITLE_NOUN)} Chronicles", f"{rng.choice(TITLE_ADJ)} Saga"])
        rec["series"] = {"name": series, "number": rng.randint(1, 7)}
        body.append([_pick(rng, "It is book {n} in the {s} series.", "This is volume {n} of the {s} series.",
                           n=rec["series"]["number"], s=series)])
    o_first, o_last = _person(rng)
    distractors = [
        f"A film adaptation is planned for {rng.randint(2025, 2029)}.",
        f"The cover art is by {o_first} {o_last}.",
        f"The {rng.choice(CITIES)[0]} Herald reviewed it favourably.",
        f"It has been translated into {rng.randint(3, 40)} languages.",
    ]
    return "book", rec, _compose(rng, intro, body, distractors), "Extract the book record from this text:\n\n{text}"


def _flight(rng: random.Random) -> tuple[str, dict, str, str]:
    chars = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
    ref = "".join(rng.choice(chars) for _ in range(6))
    first, last = _person(rng)
    rec: dict[str, Any] = {"booking_reference": ref, "passenger": {"first_name": first, "last_name": last}}
    (c1, a1), (c2, a2) = rng.sample(AIRPORTS, 2)
    d1 = DATE0 + _dt.timedelta(days=rng.randrange(0, 1400))
    segs = [{"flight_number": f"{rng.choice(AIRLINES)}{rng.randint(10, 9999)}", "from": a1, "to": a2,
             "date": d1.isoformat()}]
    sentences = [_pick(rng, "Flight {f} leaves {c1} ({a1}) on {d} for {c2} ({a2}).",
                       "On {d}, {p} flies from {a1} to {a2} on {f}.",
                       "The outbound flight is {f}, {c1} ({a1}) to {c2} ({a2}), departing {d}.",
                       f=segs[0]["flight_number"], c1=c1, a1=a1, c2=c2, a2=a2, d=segs[0]["date"], p=first)]
    if rng.random() < 0.5:
        d2 = (d1 + _dt.timedelta(days=rng.randint(2, 20))).isoformat()
        segs.append({"flight_number": f"{rng.choice(AIRLINES)}{rng.randint(10, 9999)}", "from": a2, "to": a1,
                     "date": d2})
        sentences.append(_pick(rng, "The return flight {f} departs {a2} for {a1} on {d}.",
                               "Coming back, {p} takes {f} from {a2} to {a1} on {d}.",
                               f=segs[1]["flight_number"], a1=a1, a2=a2, d=d2, p=first))
    rec["segments"] = segs
    intro = [_pick(rng, "Booking {r} is confirmed for {f} {l}.", "Hello {f} {l}, your reservation {r} is confirmed.",
                   "Reservation code {r}: passenger {f} {l}.", r=ref, f=first, l=last)]
    body: list[list[str]] = [sentences]
    if rng.random() < 0.5:
        rec["passenger"]["email"] = _email(rng, first, last, rng.choice(COMPANIES)[1])
        body.append([_pick(rng, "A receipt was sent to {e}.", "Updates will go to {e}.", e=rec["passenger"]["email"])])
    if rng.random() < 0.7:
        rec["cabin"] = rng.choice(CABINS)
        body.append([_pick(rng, "The ticket is in {c} class.", "Cabin: {c}.", "{p} travels {c} class.",
                           c=rec["cabin"], p=first)])
    if rng.random() < 0.6:
        rec["checked_bags"] = rng.randint(0, 3)
        body.append([_pick(rng, "Checked baggage allowance: {n} bags.", "The fare includes {n} checked bags.",
                           n=rec["checked_bags"])])
    o_first, o_last = _person(rng)
    distractors = [
        "Online check-in opens 24 hours before departure.",
        f"A previous reservation, {''.join(rng.choice(chars) for _ in range(6))}, was cancelled.",
        f"Travel companion {o_first} {o_last} is on a separate booking.",
        "Please be at the gate 40 minutes before departure.",
    ]
    request = "Extract the flight booking from this text:\n\n{text}"
    return "flight", rec, _compose(rng, intro, body, distractors), request


def _tool_call(rng: random.Random) -> tuple[str, dict, str, str]:
    tool = rng.choice(sorted(TOOL_SCHEMAS))
    rec: dict[str, Any] = {}
    ask: list[str] = []
    extra: list[list[str]] = []
    if tool == "get_weather":
        city = rng.choice(CITIES)[0]
        rec["city"] = city
        ask.append(_pick(rng, "I'm flying to {c} soon; what will the weather be like?",
                         "What's the weather going to be like in {c}?", "Can you check the forecast for {c}?", c=city))
        if rng.random() < 0.7:
            rec["days"] = rng.randint(1, 14)
            extra.append([_pick(rng, "I need the next {n} days.", "Please cover {n} days.", n=rec["days"])])
        if rng.random() < 0.6:
            rec["unit"] = rng.choice(["celsius", "fahrenheit"])
            extra.append([_pick(rng, "Temperatures in {u}, please.", "Use {u} for the temperatures.",
                                u=rec["unit"].capitalize())])
        distractors = [f"I was in {_other(rng, [c for c, _ in CITIES], city)} last week and it rained nonstop.",
                       "Thanks a lot!", "I keep forgetting to pack an umbrella."]
    elif tool == "book_table":
        rec["restaurant"] = rng.choice(RESTAURANTS)
        rec["party_size"] = rng.randint(2, 12)
        rec["date"] = _date(rng)
        ask.append(_pick(rng, "Could you book a table at {r} for {n} people on {d}?",
                         "Please reserve a table for {n} at {r} on {d}.", r=rec["restaurant"], n=rec["party_size"],
                         d=rec["date"]))
        if rng.random() < 0.7:
            rec["time"] = _time(rng)
            extra.append([_pick(rng, "We'd like to arrive at {t}.", "Make it for {t}.", t=rec["time"])])
        if rng.random() < 0.6:
            first, last = _person(rng)
            rec["name"] = f"{first} {last}"
            extra.append([_pick(rng, "Put the reservation under {n}.", "The booking name is {n}.", n=rec["name"])])
        distractors = [f"Last time we went to {_other(rng, RESTAURANTS, rec['restaurant'])} and it was too loud.",
                       "One of us is vegetarian.", "I'll come straight from work."]
    elif tool == "convert_currency":
        fr, to = rng.sample(TOOL_CURRENCIES, 2)
        amount = rng.choice([rng.randint(5, 5000), round(rng.randint(5, 900) + rng.choice([0.5, 0.25, 0.75]), 2)])
        rec.update(amount=amount, from_currency=fr, to_currency=to)
        ask.append(_pick(rng, "How much is {a} {f} in {t}?", "I need to convert {a} {f} into {t}.",
                         "Please convert {a} {f} to {t} for me.", a=amount, f=fr, t=to))
        oc = _other(rng, TOOL_CURRENCIES, fr, to)
        distractors = [f"Last month I changed {rng.randint(20, 900)} {oc} at the airport.",
                       "I'm paying a supplier abroad.", "The bank's rates seem high."]
    else:  # send_email
        f1, l1 = _person(rng)
        rec["to"] = _email(rng, f1, l1, rng.choice(COMPANIES)[1])
        rec["subject"] = rng.choice(SUBJECTS)
        ask.append(_pick(rng, 'Please email {t} with the subject "{s}".', 'Send an email to {t}, subject "{s}".',
                         t=rec["to"], s=rec["subject"]))
        if rng.random() < 0.5:
            rec["cc"] = list(dict.fromkeys(_email(rng, *_person(rng), rng.choice(COMPANIES)[1])
                                           for _ in range(rng.randint(1, 2))))
            extra.append([_pick(rng, "Copy {c} on it.", "Put {c} in cc.", c=_join(rec["cc"]))])
        distractors = ["Keep it short and polite.", f"{_person(rng)[0]} already knows about it.",
                       "I wrote a draft yesterday."]
    text = _compose(rng, ask, extra, distractors, k=(1, 1))
    sig = {"get_weather": "get_weather(city, unit, days)",
           "book_table": "book_table(restaurant, party_size, date, time, name)",
           "convert_currency": "convert_currency(amount, from_currency, to_currency)",
           "send_email": "send_email(to, subject, cc)"}[tool]
    return f"tool_call/{tool}", rec, text, ("Give the arguments for the tool call " + sig +
                                            " that answers this user message:\n\n{text}")


#: kind -> generator (schema name, expected record, text, request template with ``{text}``)
KINDS: dict[str, Callable[[random.Random], tuple[str, dict, str, str]]] = {
    "contact": _contact, "order": _order, "event": _event, "book": _book, "flight": _flight,
    "tool_call": _tool_call,
}


def make_case(seed: int, index: int, kind: str) -> Case:
    """Case ``index`` of ``seed``, of ``kind``."""
    rng = random.Random(f"structgen-values:{seed}:{index}:{kind}")
    schema_name, rec, text, request = KINDS[kind](rng)
    return Case(id=f"{kind}-s{seed}-{index}", kind=kind, schema_name=schema_name, schema=SCHEMAS[schema_name],
                text=text, request=request.format(text=text), expected=rec)


def make_cases(n: int, seed: int = 0) -> list[Case]:
    """``n`` cases drawn from ``seed``: each block of six holds every kind once, in a seeded order."""
    kinds = list(KINDS)
    out: list[Case] = []
    for i in range(n):
        block = i // len(kinds)
        order = kinds[:]
        random.Random(f"structgen-values:{seed}:order:{block}").shuffle(order)
        out.append(make_case(seed, i, order[i % len(kinds)]))
    return out
