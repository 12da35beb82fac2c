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

__all__ = ["HELDOUT_PHRASINGS", "PHRASINGS", "heldout", "varied"]

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


#: A second set, written before the summarizer was tuned on anything in this
#: file and never used to change it: other phrasings, longer messages, other
#: chatter and another kind of log.  {name} and {n} are filled in.
HELDOUT_PHRASINGS = (
    "my cousin {name} is flying back on the {n} from Doha, can you believe it",
    "so the thing is, {name} finally paid back the {n} quid she borrowed",
    "quick one before I forget: {name}'s locker combo is {n}",
    "{name} counted and we have {n} jars of jam in the cellar now, too many",
    "honestly the only one who remembered the alarm code was {name}, {n} apparently",
    "we got a card from {name}, she's living at {n} Harbour Street these days",
    "last thing, {name} wants {n} copies of the poster for the fete",
    "she told me {name} weighed in at {n} grams at birth, tiny",
    "random but {name} beat my high score with {n} points",
    "heads up, the membership for {name} is under number {n}",
    "if anyone asks, {name} parked in bay {n}",
    "my neighbour {name} says the skip hire cost {n} all in",
    "the dentist moved {name}'s appointment to slot {n}",
    "{name} got the lottery ticket ending {n}, fingers crossed",
    "turns out {name} has read {n} books this year, I've read two",
    "anyway {name}'s tax reference came through: {n}",
    "can't believe {name} is already on chapter {n} of her thesis",
    "my boss {name} signed off the budget at {n}",
    "by the way the train {name} recommended is the {n}, the slow one",
    "for the record, {name} swam {n} lengths this morning",
    "{name} finally fixed the boiler, error code was {n} before that",
    "mum says {name}'s baby boy arrived at {n} grams",
    "so {name} is lodging in cabin {n} on the ferry",
    "ha, {name} guessed {n} sweets in the jar and won",
    "you know {name}? her shoe size is {n}, weird question I know",
    "the vet bill for {name}'s cat was {n}, poor thing",
    "{name} has the spare key, it's tagged {n}",
    "at the quiz {name} got question {n} right and nobody else did",
    "apparently {name} paid {n} for the concert tickets, resale",
    "our landlord {name} wants the meter reading, it says {n}",
    "I owe {name} for lunch, {n} I think",
    "{name} will be at desk {n} on the third floor from monday",
    "guess what, {name} planted {n} tulip bulbs in the front garden",
    "{name} keeps saying her pin is {n} which is a terrible idea",
    "the reservation is under {name}, confirmation {n}",
    "{name} texted, the gate at the airport is {n}",
    "speaking of which, {name}'s warranty claim is number {n}",
    "so {name} lost {n} euros at the casino, classic",
    "{name} rang to say the plumber's quote was {n}",
    "can you note {name}'s shirt number is {n} for the kit order",
)
_HELDOUT_CHATTER = (
    "I was going to say something else but it's gone now",
    "it's freezing in this office, the heating is off again",
    "my cat just walked across the keyboard, sorry",
    "traffic was awful this morning, took me an hour",
    "I really need a holiday after this sprint",
    "lol that's exactly what I was thinking",
    "no worries at all, take your time",
    "brb, someone at the door",
    "this playlist is amazing, I'll send it to you",
    "ok where were we",
)


def heldout(n: int = 1000, seed: int = 23) -> tuple[list[Msg], list[tuple[str, ...]]]:
    """Like :func:`varied` with :data:`HELDOUT_PHRASINGS`: longer messages, other logs."""
    rng = random.Random(seed)
    msgs: list[Msg] = [Msg.system("You are a coding assistant that can run commands.")]
    facts: list[tuple[str, ...]] = []
    phrasings = list(HELDOUT_PHRASINGS)
    rng.shuffle(phrasings)
    slots = sorted(rng.sample(range(5, int(n * 0.9)), len(phrasings)))
    call = 0
    while len(msgs) < n:
        if slots and len(msgs) >= slots[0]:
            slots.pop(0)
            name = f"{rng.choice(_FIRST)} {rng.choice(_LAST)}"
            number = str(rng.randint(10, 99999))
            said = phrasings.pop().format(name=name, n=number)
            chat = rng.sample(_HELDOUT_CHATTER, 3)
            text = f"{chat[0].capitalize()}. {chat[1].capitalize()}... {said}! {chat[2]}."
            facts.append((name, number))
            msgs.append(Msg.user(text))
            msgs.append(Msg.assistant(rng.choice(("Ha, good to know.", "Okay!", "Wow."))))
            continue
        if rng.random() < 0.35:
            msgs.append(Msg.user(f"Please rebuild the {rng.choice(('api', 'web', 'db'))} image"))
            for _ in range(rng.randint(1, 4)):
                call += 1
                cid = f"call_{call}"
                msgs.append(Msg.tool_call("docker_build", {"tag": f"v{call}"}, call_id=cid))
                lines = rng.choice([6, 6, 200])
                out = "\n".join(
                    f"Step {k}/{lines} : RUN pip install pkg{rng.randint(1, 400)}=="
                    f"{rng.randint(1, 9)}.{rng.randint(0, 20)} ---> {rng.getrandbits(40):x}"
                    for k in range(1, lines + 1)
                )
                msgs.append(Msg.tool_result(cid, out, name="docker_build"))
            msgs.append(Msg.assistant("The image built fine."))
        else:
            a, b = rng.sample(_HELDOUT_CHATTER, 2)
            msgs.append(Msg.user(a))
            msgs.append(Msg.assistant(b))
    return msgs[:n], facts
