"""A varied evaluation set for the summarizer: facts said in passing, among chatter and tool logs.

Each planted fact is a person's name and a number, said casually in one of
the hand-written phrasings below (no two alike), inside a longer chatty user
message; around them are small talk and tool runs that print large logs
(which the compressor offloads).  A fact survives when its name and its
number are both in the working context after compression.
"""

from __future__ import annotations

import random

from actormem.messages import Msg

__all__ = ["PHRASINGS", "varied"]

#: Ways a user mentions a fact in passing: {name} and {n} are filled in.
PHRASINGS = (
    "oh and {name} finally told me the gate code, it's {n}",
    "{name} moved into flat {n} last week, so that's where the party is",
    "btw {name}'s new extension is {n} if you need to reach her",
    "I think {name} paid {n} for that old bike, which is crazy",
    "apparently {name} ran the half marathon in {n} seconds flat",
    "{name} keeps a locker at the gym, number {n}",
    "we booked table {n} at the tapas place, {name} sorted it",
    "{name}'s invoice came in at {n} euros, ouch",
    "remind me later that {name} owes me {n}",
    "so {name} got seat {n} on the flight, lucky",
    "the parcel for {name} has tracking number {n}",
    "{name} scored {n} on the entrance test!!",
    "funny story, {name} has {n} houseplants now",
    "the wifi password at {name}'s is literally {n}",
    "my badge got swapped with {name}'s, mine is {n} now",
    "ugh, {name} said the repair will cost {n}",
    "{name} lives at number {n} on the hill road",
    "I promised {name} I'd bring {n} cupcakes",
    "{name}'s student id ends in {n}, don't ask why I know",
    "{name} wants the meeting in room {n} instead",
    "we need {n} chairs for {name}'s talk",
    "the bus {name} takes is the {n}, it stops right outside",
    "{name} just hit {n} followers, wild",
    "{name} counted {n} birds on the walk this morning",
    "passport for {name} is number {n}, keep it safe",
    "{name}'s order went out as {n}",
    "rent for {name}'s studio went up to {n}",
    "I think the pin {name} gave me was {n}",
    "{name} drove {n} km yesterday, no breaks",
    "the policy number on {name}'s insurance is {n}",
    "{name} is in ward {n} at the hospital, visiting tomorrow",
    "{name} bid {n} on the painting",
    "lol {name} ate {n} dumplings in one go",
    "{name} says the warehouse shelf is {n}",
    "hey so {name}'s booking reference is {n}",
    "{name} quoted us {n} for the garden",
    "{name} turned {n} on saturday, we sang badly",
    "mind you, {name} has been with the firm for {n} months",
    "{name} lent me {n} for the taxi",
    "{name}'s new phone number ends with {n}",
    "{name} rang, the claim number is {n}",
    "the cabin {name} rented sleeps {n}",
    "{name} said the voucher code is {n}",
    "{name} printed {n} flyers for the fair",
    "{name} is driving car number {n} in the rally",
)
_FIRST = [
    "Maria",
    "Ines",
    "Kenji",
    "Aisha",
    "Lars",
    "Priya",
    "Tomas",
    "Olga",
    "Chen",
    "Fatima",
    "Diego",
    "Noor",
    "Sven",
    "Amara",
    "Yuki",
    "Bruno",
    "Leila",
    "Pavel",
    "Rosa",
    "Idris",
]
_LAST = [
    "Lopez",
    "Tanaka",
    "Okafor",
    "Berg",
    "Raman",
    "Silva",
    "Ivanova",
    "Wei",
    "Haddad",
    "Ruiz",
    "Novak",
    "Mensah",
]
_CHATTER = (
    "anyway, how was your weekend? mine was quiet",
    "sorry, I keep getting distracted by the rain",
    "it's been such a long week honestly",
    "haha yes, I saw that too",
    "the coffee here is terrible today",
    "ok let's get back to it",
    "thanks, that's really helpful",
    "I might grab lunch soon",
    "right, makes sense",
    "did you see the game last night? unreal",
)


def varied(n: int = 1000, seed: int = 11) -> tuple[list[Msg], list[tuple[str, ...]]]:
    """A conversation of ``n`` messages and the (name, number) of each planted fact."""
    rng = random.Random(seed)
    msgs: list[Msg] = [Msg.system("You are a helpful assistant with shell access.")]
    facts: list[tuple[str, ...]] = []
    phrasings = list(PHRASINGS)
    rng.shuffle(phrasings)
    slots = sorted(rng.sample(range(5, int(n * 0.9)), len(phrasings)))
    call = 0
    while len(msgs) < n:
        if slots and len(msgs) >= slots[0]:
            slots.pop(0)
            name = f"{rng.choice(_FIRST)} {rng.choice(_LAST)}"
            number = str(rng.randint(100, 98765))
            said = phrasings.pop().format(name=name, n=number)
            before = rng.sample(_CHATTER, 2)
            text = f"{before[0].capitalize()}. {said}. {before[1].capitalize()}."
            facts.append((name, number))
            msgs.append(Msg.user(text))
            msgs.append(Msg.assistant(rng.choice(("Got it.", "Noted!", "Ha, okay.", "Sure."))))
            continue
        if rng.random() < 0.4:
            msgs.append(Msg.user(f"Can you run the checks on module {rng.randint(1, 30)}?"))
            for _ in range(rng.randint(1, 3)):
                call += 1
                cid = f"call_{call}"
                msgs.append(Msg.tool_call("run_shell", {"cmd": "pytest -q"}, call_id=cid))
                lines = rng.choice([4, 4, 300])
                out = "\n".join(
                    f"2025-05-0{rng.randint(1, 9)} 12:{rng.randint(10, 59)}:{rng.randint(10, 59)} "
                    f"INFO worker-{rng.randint(1, 8)} processed batch {rng.randint(1, 9999)} "
                    f"in {rng.random():.3f}s"
                    for _ in range(lines)
                )
                msgs.append(Msg.tool_result(cid, out, name="run_shell"))
            msgs.append(Msg.assistant("Done, everything passed."))
        else:
            msgs.append(Msg.user(rng.choice(_CHATTER)))
            msgs.append(Msg.assistant(rng.choice(_CHATTER)))
    return msgs[:n], facts
