"""A small but realistic memory to explore: a travel agent's three weeks with Ada."""

from __future__ import annotations

import time
from pathlib import Path

from actormem import MemoryRuntime, Msg
from actormem.store import MemoryStore, Namespace, NewMemory

ADA = Namespace(user_id="ada", agent_id="travel")
BOB = Namespace(user_id="bob", agent_id="travel")
XSS = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'

_DAY = 86_400.0

_ITEMS: list[tuple[float, str, str, float, tuple[str, ...]]] = [
    (20, "fact", "Ada lives in Paris", 0.7, ()),
    (20, "preference", "Ada prefers window seats on long flights", 0.6, ("travel",)),
    (19, "episode", "Ada asked for flights from Paris to Lisbon in March", 0.4, ()),
    (18, "fact", "Ada is allergic to peanuts", 0.9, ("health",)),
    (16, "preference", "Ada likes small boutique hotels near the old town", 0.6, ()),
    (15, "episode", "Compared three hotels in Alfama; Ada liked Casa do Fado", 0.4, ()),
    (
        13,
        "procedure",
        "Always check the baggage allowance before booking a low-cost flight",
        0.5,
        (),
    ),
    (12, "fact", "Ada's passport expires in June 2027", 0.8, ("documents",)),
    (11, "episode", "Booked TAP flight TP433 Paris to Lisbon on 14 March", 0.5, ("booking",)),
    (
        9,
        "summary",
        "Trip planning: flights booked, hotel shortlisted, dinner ideas pending",
        0.5,
        (),
    ),
    (8, "preference", "Ada is vegetarian on weekdays", 0.6, ()),
    (6, "episode", "Ada asked for a fado dinner with vegetarian options", 0.4, ()),
    (5, "fact", "Ada's colleague Marta will join on 15 March", 0.5, ()),
    (4, "episode", "Reserved a table at Tasca do Chico for 15 March, 20:30", 0.5, ("booking",)),
    (3, "fact", "Ada wants to visit Sintra on a day trip", 0.5, ()),
    (2, "episode", "Checked train times Lisbon to Sintra: every 20 minutes from Rossio", 0.4, ()),
    (1, "fact", f"Ada pasted this into a note: {XSS}", 0.3, ()),
    (0, "episode", "Ada confirmed the Sintra day trip for 16 March", 0.4, ()),
]

# Conversation turns kept as episodes: (days ago, text).
_TURNS: list[tuple[float, str]] = [
    (20, "Ada introduced herself and asked for help planning a spring trip"),
    (20, "Discussed Lisbon versus Porto; Ada leaned towards Lisbon"),
    (19, "Listed direct flights Paris-Lisbon for 14 March: TAP, Air France, easyJet"),
    (19, "Ada asked about the weather in Lisbon in mid March"),
    (18, "Ada mentioned a peanut allergy when asking about pastel de nata"),
    (16, "Shortlisted Casa do Fado, Memmo Alfama and Lisboa Tejo"),
    (16, "Ada asked whether the hotels have lifts"),
    (15, "Compared cancellation rules of the three hotels"),
    (13, "Explained the baggage rules of easyJet and TAP"),
    (12, "Ada asked to set a reminder to renew her passport"),
    (11, "Ada paid for the TAP flight; seat 14A reserved"),
    (11, "Sent the booking confirmation to Ada's email"),
    (9, "Ada asked for a summary of everything planned so far"),
    (6, "Looked up fado houses in Alfama with vegetarian menus"),
    (5, "Ada said Marta arrives on 15 March from Madrid"),
    (5, "Checked Marta's flight from Madrid: IB3104 lands at 10:40"),
    (4, "Ada asked to book a table for two on the evening of 15 March"),
    (3, "Ada asked how to get from Lisbon to Sintra"),
    (2, "Compared the Pena Palace and Quinta da Regaleira tickets"),
    (1, "Ada asked for a packing list for a rainy March week"),
    (0, "Ada asked what was booked for dinner in Lisbon"),
]


def seed_store(store: MemoryStore, now: float | None = None) -> dict[str, str]:
    """Fill ``store`` with Ada's and Bob's memories; returns some ids by name."""
    now = time.time() if now is None else now
    ids: dict[str, str] = {}
    items = [
        NewMemory(content=c, kind=k, importance=imp, tags=tags, created_at=now - days * _DAY)
        for days, k, c, imp, tags in _ITEMS
    ] + [
        NewMemory(content=c, kind="episode", importance=0.3, created_at=now - days * _DAY - 600)
        for days, c in _TURNS
    ]
    for item, res in zip(items, store.add_many(ADA, items, dedup=False), strict=True):
        ids[item.content] = res.id
    paris = ids["Ada lives in Paris"]
    store.update(ADA, paris, content="Ada lives in Berlin", reason="reconcile: 'I moved to Berlin'")
    store.update(ADA, paris, importance=0.8, reason="importance raised: mentioned again")
    ids["home"] = paris
    ids["xss"] = ids[f"Ada pasted this into a note: {XSS}"]
    store.delete(ADA, ids["Ada is vegetarian on weekdays"], reason="reconcile: 'I eat meat again'")
    store.add_many(
        BOB,
        [
            NewMemory(
                content="Bob travels for work to Munich every month", created_at=now - 3 * _DAY
            ),
            NewMemory(content="Bob prefers aisle seats", kind="preference", created_at=now - _DAY),
        ],
        dedup=False,
    )
    return ids


def seed_runtime(rt: MemoryRuntime) -> dict[str, str]:
    """Seed the runtime's store, keyed facts, journal and short-term memory."""
    store = rt.store
    assert store is not None
    ids = seed_store(store)
    rt.save_fact("home_airport", "BER", category="travel")
    rt.save_fact("seat", "window", category="preferences")
    rt.save_fact("loyalty", "TAP Miles&Go 123456", category="travel")
    rt.save_fact("home_airport", "BER (Brandenburg)", category="travel")
    if rt.journal is not None:
        rt.update_now(
            "Plan Ada's Lisbon trip, 14-17 March", ["book the Sintra train", "send the itinerary"]
        )
        rt.log(
            "TOOL_USE", "search_flights(CDG, LIS, 2027-03-14) -> 3 offers", tool="search_flights"
        )
        rt.log("THOUGHT", "TP433 leaves at 09:05 and fits Ada's morning preference")
        rt.log("USER_FEEDBACK", "Book the 09:05 one, window seat please")
        rt.dream(force=True)
    rt.add(Msg.system("You are a travel assistant with long-term memory."))
    rt.add(Msg.user("Can you remind me what we booked for dinner in Lisbon?"))
    call = Msg.tool_call("search_bookings", {"city": "Lisbon", "kind": "restaurant"})
    rt.add(
        [call, Msg.tool_result(call.tool_uses[0].id, "Tasca do Chico, 15 March 20:30, 2 people")]
    )
    rt.add(Msg.assistant("Tasca do Chico on 15 March at 20:30, for two: you and Marta."))
    rt.flush()
    return ids


def make_runtime(folder: Path, **kwargs: object) -> MemoryRuntime:
    """A runtime with a DuckDB store and a journal under ``folder``."""
    return MemoryRuntime(
        store=folder / "memory.duckdb",
        session_dir=folder / "sessions",
        namespace=ADA,
        journal=True,
        autocontext=True,
        **kwargs,  # type: ignore[arg-type]
    )
