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

__all__ = ["CHAT_NEWS", "HELDOUT_PHRASINGS", "PHRASINGS", "chat", "heldout", "varied"]

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


#: Short first-person news between two friends, each with the words a later
#: question would ask for (the answer).  LoCoMo's answers die like this: a
#: short "we adopted a puppy" outranked by long reflective sentences.
CHAT_NEWS = (
    ("I finally signed up for a pottery class, Tuesdays after work.", "pottery class"),
    ("We adopted a greyhound last weekend, his name is Biscuit.", "Biscuit"),
    ("My sister Hanne is moving to Tromsø in the spring.", "Tromsø"),
    ("Started learning the cello, my fingers hurt already!", "cello"),
    ("I ran my first 10k on Sunday, 58 minutes.", "58 minutes"),
    ("Got the job at the library in Arnhem, I start in May.", "Arnhem"),
    ("We painted the kitchen sage green, finally.", "sage green"),
    ("My grandmother turned 91 yesterday.", "91"),
    ("I've gone vegetarian since February.", "vegetarian"),
    ("Booked a week in Porto for our anniversary.", "Porto"),
    ("The kids built a treehouse with their uncle Mats.", "treehouse"),
    ("I broke my wrist skating, it's in a cast for six weeks.", "wrist"),
    ("Joined a choir at the community hall, we sing Fauré.", "choir"),
    ("My son Elio said his first word: 'lamp'.", "lamp"),
    ("We sold the old Volvo and bought a cargo bike.", "cargo bike"),
    ("I'm volunteering at the food bank on Saturdays now.", "food bank"),
    ("Our band played at the Blue Heron pub, forty people came!", "Blue Heron"),
    ("I passed my driving test on the third try.", "driving test"),
    ("Planted twelve apple trees behind the barn.", "apple trees"),
    ("My dad had knee surgery on Monday, he's fine.", "knee surgery"),
    ("We're expecting twins in October!", "twins"),
    ("Finished knitting a scarf for Oona, bright orange.", "scarf"),
    ("I got a tattoo of a fox on my ankle.", "fox"),
    ("Took the night train to Vienna, slept the whole way.", "Vienna"),
    ("Made sourdough for the first time, it was a brick.", "sourdough"),
    ("My article on bees got published in the local paper.", "bees"),
    ("Our cat Pickle had three kittens.", "Pickle"),
    ("I quit coffee, day nine, send help.", "coffee"),
    ("Bought a secondhand piano for 300 euros.", "piano"),
    ("We hiked the Kungsleden trail in Lapland.", "Kungsleden"),
    ("I'm taking evening classes in Portuguese.", "Portuguese"),
    ("My brother Teodor opened a bakery on Mill Lane.", "Mill Lane"),
    ("Won second prize at the chess club tournament.", "chess"),
    ("I adopted two hens, Dot and Dash.", "Dot and Dash"),
    ("Our roof leaked in the storm, the attic is soaked.", "attic"),
    ("Started a podcast about old maps.", "old maps"),
    ("We went camping at Loch Etive, midges everywhere.", "Loch Etive"),
    ("I got promoted to head nurse on the ward.", "head nurse"),
    ("My daughter Sunniva lost her first tooth.", "first tooth"),
    ("I've been sleeping badly since the move, maybe four hours.", "four hours"),
)
#: Parts of everyday news: what was done, where, when.  A conversation of
#: friends is dense with such lines and a question may ask about any of them,
#: so a summary keeps a share of them that grows with its size.
_DID = (
    "went to a salsa workshop",
    "had dinner with my old flatmates",
    "saw a jazz trio",
    "tried rock climbing",
    "helped my cousin move flats",
    "picked strawberries",
    "visited the glass museum",
    "fixed the bike chain",
    "watched the eclipse",
    "ran a charity quiz",
    "bought a vintage lamp",
    "went paddleboarding",
    "took a photography walk",
    "judged a baking contest",
    "met my new manager",
    "sketched the harbour boats",
    "repaired the garden fence",
    "found a stray kitten",
    "sang karaoke",
    "learned to make dumplings",
)
_WHERE = (
    "in Ghent",
    "at the riverside market",
    "near Lake Bled",
    "at Aunt Rosalind's farm",
    "in the old tram depot",
    "on Skye",
    "at the Copper Kettle café",
    "in Marseille",
    "at the Oakfield community centre",
    "by the canal in Utrecht",
    "in Bergen",
    "at the Linden Street gym",
    "in the Cotswolds",
    "at the botanical garden",
    "in Kraków",
)
_WHEN = (
    "last Friday",
    "yesterday",
    "over the bank holiday",
    "on Sunday morning",
    "two weeks ago",
    "this afternoon",
    "on my birthday",
)
_TAIL = (
    "",
    ", it was such a good time",
    ", honestly I needed that",
    " and I'm still smiling about it",
    ", I'll show you the pictures",
)
#: Parts of long reflective remarks: many rare words, little a question asks for.
_MUSE_OPEN = (
    "You know, I keep thinking about how",
    "Honestly, lately it feels like",
    "It's funny, whenever I look back I realise",
    "Sometimes I wonder whether",
    "I was reflecting on the walk home that",
    "The older I get the more I notice that",
    "What strikes me, every single time, is that",
    "I suppose what I'm really trying to say is that",
)
_MUSE_MIDDLE = (
    "the little rituals of an ordinary week carry more meaning than the grand gestures",
    "patience with ourselves is the hardest discipline and the most rewarding one",
    "every friendship needs some tending, like a garden through a dry summer",
    "the quiet evenings are when the important conversations sneak up on us",
    "being surrounded by people who believe in you changes what feels possible",
    "taking risks is frightening until you see how much you grow afterwards",
    "memories become softer and kinder the longer we carry them around",
    "the seasons turning remind me that nothing stays difficult for ever",
    "curiosity is a kind of courage that nobody ever talks about",
    "gratitude sneaks in through the smallest cracks of a busy life",
)
_MUSE_END = (
    "and I'm trying to hold on to that feeling",
    "which is something I want to teach my family too",
    "even if it takes years to really understand it",
    "and that thought keeps me going on the grey days",
    "though of course it's easier said than done",
    "and I think you understand that better than most people",
)
_CHAT_REACT = (
    "Wow, that's amazing!",
    "Oh no, I'm so sorry to hear that.",
    "Ha, that's brilliant.",
    "That sounds lovely, honestly.",
    "Good for you, really.",
    "I'm so happy for you!",
    "That must have been quite something.",
)
_CHAT_ASK = (
    "So what's new with you?",
    "Anything exciting happen since we last talked?",
    "How have things been?",
    "Tell me, what have you been up to?",
)


#: The share of other turns that are everyday news (the rest: remarks and reactions).
NEWS_SHARE = 0.3


def chat(seed: int = 31) -> tuple[list[Msg], list[tuple[str, ...]]]:
    """A LoCoMo-like conversation of two friends over 20 dated sessions.

    Each session holds two short pieces of news from :data:`CHAT_NEWS` (some
    after a question), everyday events ("I went paddleboarding in Bergen
    yesterday"), long reflective remarks and reactions.  The facts are the
    news answers and half of the events (what, where and when, as said).
    Written for a regression test of the default summary size, since LoCoMo
    itself is not committed: like LoCoMo, the answers are a large share of
    the text, so how many survive depends on the summary's size (seed 31,
    one pass / grown: 0.2 and 4,096 tokens kept 75% / 77%, 0.4 and 12,288
    kept 92% / 89%).
    """
    rng = random.Random(seed)
    speakers = ("Ingrid", "Kwame")
    news = list(CHAT_NEWS)
    rng.shuffle(news)
    msgs: list[Msg] = []
    facts: list[tuple[str, ...]] = []
    turn = 0

    def say(text: str) -> None:
        nonlocal turn
        msgs.append(Msg.user(text, name=speakers[turn % 2]))
        turn += 1

    for session in range(20):
        say(f"(1:{10 + session} pm on {3 + session} May, 2023) Hey, good to see you again!")
        for k in range(28):
            if k in (7, 19) and news:
                line, answer = news.pop()
                if rng.random() < 0.5:
                    say(rng.choice(_CHAT_ASK))
                say(line)
                facts.append((answer,))
                say(rng.choice(_CHAT_REACT))
            elif rng.random() < NEWS_SHARE:
                event = f"{rng.choice(_DID)} {rng.choice(_WHERE)} {rng.choice(_WHEN)}"
                say(f"I {event}{rng.choice(_TAIL)}.")
                if rng.random() < 0.5:
                    facts.append((event,))
            elif rng.random() < 0.6:
                say(
                    f"{rng.choice(_MUSE_OPEN)} {rng.choice(_MUSE_MIDDLE)}, {rng.choice(_MUSE_END)}."
                )
            else:
                say(rng.choice(_CHAT_REACT))
    return msgs, facts
