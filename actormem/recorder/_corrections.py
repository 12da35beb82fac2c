"""Corrections of the offline extractor: what a fact is about, and what it takes back.

Kept apart from the rules (``_rules.py``) because it is a second question
asked of every clause: not "what does it state?" but "does it take back
something said before?".

**Object slots.**  A fact about a thing one consumes, does, owns or likes
carries a slot made of a family and the thing's key: ``consume:espresso``
("I drink espresso every morning"), ``do:tennis`` ("I play tennis"),
``do:climb`` ("I go climbing"), ``own:volvo`` ("I drive a Volvo"),
``pref:jazz`` ("I love jazz", as before).  The key is the head of the thing
said, lower case, stemmed ("knitting" and "knit" share ``knit``; "eggs" and
"egg" share ``egg``); a known food, drink or possession in the phrase wins
over the last word ("a Tesla Model 3" is ``tesla``).  A negation of the same
thing has the same slot ("I don't eat meat anymore" is ``consume:meat``), so
the offline reconciliation (``reconcile_by_slot``) updates the held fact
instead of storing its contradiction beside it, and the other way round
("I eat pork again" updates "User does not eat pork").

**Retractions.**  A clause that stops, sells, quits or gives up a thing
("I stopped playing tennis", "I quit coffee", "I sold the Volvo", "I got rid
of my bike", "I no longer drink alcohol", "I'm not drinking soda any more")
is a *retraction*: when the family is known from its verb it has that
family's slot, and when it is not ("I gave up sugar") it names the slot of
every family as ``replaces``.  A later clause of the same message that
states a new thing of the same family ("..., I play padel now") replaces the
retracted slot: the held fact is updated to the new one (the store's history
keeps the old text) and the retraction is not stored.

**Swaps** say old and new at once: "I switched from espresso to decaf",
"I replaced X with Y", "I swapped X for Y", "not X any more, now Y",
"no more X, Y now", "X is out, Y is in", "... Y instead of X".  Without a
verb the family is unknown, so the new fact is written from the held one
("User drinks espresso every morning" becomes "User drinks decaf"); a bare
"not X any more" / "no more X" turns the held fact into "User no longer
...".  Retractions and swaps that find no held fact and that no rule
recognised on its own are dropped: they correct nothing, and say nothing
a reader could use.  "I stopped by the shop", "I stopped at the bank" and
"gave up on" are not retractions.
"""

from __future__ import annotations

import re
from typing import Final

import msgspec

from actormem.recorder._lexicon import _DIET_WORDS, _POSSESSIONS
from actormem.recorder._text import _TRAILING, _rx, _words, third_person
from actormem.recorder._types import ExtractedFact

__all__: list[str] = []

#: The families of object slots, in the order a family-less retraction names them.
FAMILIES: Final = ("consume", "do", "own", "pref")

_CONSUME_VERBS: Final = _words(
    "eat eats eating ate drink drinks drinking drank consume consuming take taking have "
    "having smoke smoking"
)
_DO_VERBS: Final = _words(
    "play plays playing played practice practise practicing practising do doing"
)
_OWN_VERBS: Final = _words(
    "own owning owned drive driving drove ride riding rode have having use using"
)
_LIKE_VERBS: Final = _words("like liking love loving enjoy enjoying")
_DIET_SET: Final = frozenset(w.casefold() for w in _DIET_WORDS.replace("-", " ").split("|"))
_OWN_SET: Final = frozenset(w.casefold() for w in _POSSESSIONS.split("|"))

_TAIL: Final = _rx(
    r"\s+(?:every|each|on|at|in|with|for|before|after|most|daily|since|from|when|while|because|"
    r"to|during|all|twice|once|these|this|that|now|anymore|any more|any longer|no more|"
    r"instead|again|too|though|either|anyway|regularly|a lot|lately|nowadays|any|and|but|or|"
    r"online|offline|outdoors|indoors|together|competitively|professionally|casually|"
    r"seriously|whenever|if|as)\b.*$|\s*[,;(].*$"
)
_DET: Final = _rx(
    r"^(?:the|a|an|my|our|your|his|her|their|some|any|that|this|those|these|all|more|much|"
    r"old|new|little|big)\s+"
)
_NOT_THINGS: Final = _words(
    "it that this them those these there here by at in to on for off over and so it's up "
    "out really just being doing"
)


_PERSONS: Final = _words("i i'm i've i'd i'll me we we're we've us you you're it's")
_INTRANSITIVE: Final = _words(
    "knit crochet sew paint draw sketch swim surf ski snowboard skate climb hike cycle garden "
    "fish sing dance bake brew meditate row box fence juggle run jog smoke"
)


def stem(word: str) -> str:
    """A word's key: "knitting" and "knit", "hiking" and "hike", "eggs" and "egg" agree."""
    w = word.casefold().strip("'\".,!;:")
    if w.endswith("ing") and len(w) > 5:
        w = w[:-3]
        if len(w) > 2 and w[-1] == w[-2] and w[-1] not in "ls":
            w = w[:-1]
    if w.endswith("ies") and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")) and len(w) > 3:
        w = w[:-1]
    if w.endswith("e") and len(w) > 3:
        w = w[:-1]
    return w


def thing(phrase: str) -> str:
    """The thing a phrase names: "the Volvo every day" -> "Volvo" ("" when none)."""
    p = phrase.strip().strip("\"'`").rstrip(" .!,;:")
    p = _TAIL.sub("", p)
    while True:
        q = _DET.sub("", p)
        if q == p:
            break
        p = q
    words = p.split()
    if not words or words[0].casefold() in _NOT_THINGS or len(words) > 5:
        return ""
    if not _PERSONS.isdisjoint(w.casefold() for w in words):
        return ""  # "I'm", "we": a clause, not a thing
    return p


def key(phrase: str, family: str | None = None) -> str:
    """The object key of a thing (see the module docstring)."""
    words = [w.casefold() for w in phrase.split()]
    if not words:
        return ""
    known = _DIET_SET if family == "consume" else _OWN_SET if family == "own" else frozenset()
    if family is None:
        known = _DIET_SET | _OWN_SET
    for w in reversed(words):
        if w in known:
            return stem(w)
    return stem(words[-1])


def slot_of(family: str, phrase: str) -> str:
    """The slot of ``phrase`` in ``family`` ("pref" keeps the whole phrase, as likes do)."""
    if family == "pref":
        return f"pref:{phrase.casefold()}"
    k = key(phrase, family)
    return f"{family}:{k}" if k else ""


def every_family(phrase: str) -> tuple[str, ...]:
    """The slots ``phrase`` would have in each family (a retraction without a verb)."""
    return tuple(s for s in (slot_of(f, phrase) for f in FAMILIES) if s)


def family_of_verb(verb: str, obj: str) -> str | None:
    """The family of a verb and its object ("drink" -> consume, "play" -> do, ...)."""
    v = verb.casefold()
    first = obj.split()[0].casefold() if obj.split() else ""
    diet = any(w.casefold() in _DIET_SET for w in obj.split()) or first in _DIET_SET
    if diet and v in ("have", "having", "had", "take", "taking", "took", "do", "doing"):
        return "consume"
    if v in ("have", "having", "had", "take", "taking", "taken", "took"):
        return "consume" if diet else ("own" if obj else None)
    if v in _CONSUME_VERBS:
        return "consume"
    if v in _DO_VERBS:
        return "do"
    if v in _OWN_VERBS:
        return "own"
    if v in _LIKE_VERBS:
        return "pref"
    return None


# -- what a clause takes back ---------------------------------------------------------------------

#: "I stopped playing tennis", "I quit coffee", "I gave up meat", "I've ditched my car".
_CEASE: Final = _rx(
    r"\bi(?:'ve| have)?(?: just| finally| recently| completely| totally| mostly)? (?:stopped|"
    r"quit|quitted|gave up|given up|ditched|dropped|kicked|cut out|cut|abandoned) (.+)$"
)
#: "I'm off coffee", "I'm done with golf", "I'm over jazz".
_DONE_WITH: Final = _rx(
    r"\b(?:i'm|i am|we're|we are) (?:\w+ )?(?:off|done with|through with|finished with) (.+)$"
)
#: "I sold the Volvo", "I got rid of my bike", "we gave away the piano".
_PART_WITH: Final = _rx(
    r"\b(?:i|we)(?:'ve| have)?(?: just| finally| recently)? (?:sold|got rid of|gotten rid of|"
    r"gave away|given away|donated|traded in|scrapped|totall?ed|wrote off) (.+)$"
)
#: "I don't eat meat anymore", "I no longer play chess", "I'm not drinking soda any more".
_NEGATED: Final = _rx(
    r"\b(?:i|we) (?:really |just |actually )?(?:don't|do not|dont|no longer|never|can't|"
    r"cannot)(?: really| even)? (\w+)(?: (.+))?$|"
    r"\b(?:i'm|i am|we're|we are) (?:no longer|not) (\w+ing)(?: (.+))?$"
)
#: "I used to play tennis", "I haven't played the violin in years".
_USED_TO: Final = _rx(
    r"\b(?:i|we) (?:only )?used to (\w+)(?: (.+))?$|"
    r"\b(?:i|we) (?:haven't|have not|hadn't) (\w+)(?: (.+?))? (?:in|for) (?:years|months|ages|"
    r"a long time|a while|decades)$"
)
_ANYMORE: Final = _rx(r"\b(?:any ?more|any longer|no longer|these days)\b")
_NOT_CEASED: Final = _rx(
    r"^(?:by|at|in|for|to|off|over|on|here|there|and|because|when|after|before|being|the day|"
    r"now|today|tonight|yet|work|duty|sick|home|it all|everything|"
    r"with|working|work|my job|the job|job|school|college|university|uni|trying|it|that|this)\b"
)
#: Swaps with a verb: "I switched from espresso to decaf", "I replaced X with Y", ...
_SWAPS: Final = (
    _rx(
        r"\b(?:sold|got rid of|gotten rid of|traded in|gave away|given away|scrapped) (.+?),? "
        r"(?:and |then )?(?:i |we )?(?:now )?(?:bought|got|have|drive|ride|picked up|replaced "
        r"it with)(?: myself| ourselves)? (.+)$"
    ),
    _rx(
        r"\b(?:switched|moved|changed|went|gone|converted|upgraded|downgraded|transitioned|"
        r"graduated) (?:over |on |back )?from (.+?) to (.+)$"
    ),
    _rx(r"\b(?:replaced|substituted) (.+?) (?:with|by|for) (.+)$"),
    _rx(r"\b(?:swapped|traded|exchanged|ditched|dropped)(?: in)? (.+?) for (.+)$"),
)
#: Swaps without a verb: "not espresso any more, now decaf", "X is out, Y is in".
_ELLIPTIC_SWAPS: Final = (
    _rx(
        r"^(?:it's |it is )?(?:not|no longer) (.+?) any ?(?:more|longer),? (?:but )?(?:it's |it is "
        r"|now |just |only )*(.+?)(?: now| instead| these days| for me)*$"
    ),
    _rx(
        r"^no more (.+?),? (?:but |it's |it is |now |just |only )*(.+?)"
        r"(?: now| instead| these days| for me)*$"
    ),
    _rx(
        r"^(.+?) (?:is|are|'s) (?:out|gone|history|over),? (?:and )?(?:now )?(?:it's |it is )?"
        r"(.+?)(?: is in| are in| now| instead)+$"
    ),
    _rx(r"^(?:now |it's |it is )?(.+?) now,? (?:and |but )?not (.+?)(?: any ?more| any longer)?$"),
    _rx(r"^(?:now |it's |it is )?(.+?), (?:and |but )?not (.+?) any ?(?:more|longer)$"),
)
#: the last two name the new thing first: "decaf now, not espresso"
_NEW_FIRST: Final = 3
#: A bare retraction without a verb: "not espresso any more", "no more coffee for me".
_ELLIPTIC: Final = (
    _rx(r"^(?:it's |it is )?(?:not|no longer) (.+?) any ?(?:more|longer)(?: for me)?$"),
    _rx(r"^no (?:more|longer) (.+?)(?: for me| in my life)?$"),
    _rx(r"^(.+?) (?:is|are|'s) (?:gone|history)(?: now)?$"),
)
_INSTEAD: Final = _rx(r"\b(?:instead of|rather than|in place of) (.+)$")


class Change:
    """What a clause takes back.

    Attributes:
        retract: Slots the clause says are no longer true.
        family: The family of the thing taken back (None: not known).
        old: The thing taken back, as said.
        new: For a swap, the thing that replaces it, as said ("" otherwise).
        verbless: The clause names things but no verb (its text comes from the held fact).
    """

    __slots__ = ("family", "new", "old", "retract", "verbless")

    def __init__(
        self, old: str, family: str | None, new: str = "", *, verbless: bool = False
    ) -> None:
        self.old = old
        self.family = family
        self.new = new
        self.verbless = verbless
        if family is None:
            self.retract = every_family(old)
        else:
            s = slot_of(family, old)
            self.retract = (s,) if s else ()


def _verb_object(rest: str) -> tuple[str | None, str]:
    """ "playing tennis on weekends" -> ("do", "tennis"); "knitting" -> ("do", "knitting")."""
    words = rest.split(None, 1)
    if not words:
        return None, ""
    head = words[0].casefold()
    after = words[1] if len(words) > 1 else ""
    if head in ("going", "go") and after:  # "going hiking"
        return "do", thing(after)
    if head in ("listening", "listen") and after.casefold().startswith("to "):
        return None, thing(after[3:])
    if head.endswith("ing") and head not in ("nothing", "something", "everything", "thing"):
        obj = thing(after)
        fam = family_of_verb(head, obj)
        if fam is not None and obj:
            return fam, obj
        if fam is None and not obj:
            return "do", head  # "I quit smoking", "I stopped knitting"
        return fam, obj
    return None, thing(rest)


def change_of(clause: str) -> Change | None:
    """What ``clause`` takes back, or None when it takes nothing back."""
    for n, rx in enumerate(_ELLIPTIC_SWAPS):
        m = rx.search(clause)
        if m is not None:
            old, new = thing(m.group(1)), thing(m.group(2))
            if n >= _NEW_FIRST:
                old, new = new, old
                if clause.startswith(new) and old.islower() and new[1:].islower():
                    new = new.lower()  # "Decaf now, not espresso": capital of the sentence
            if old and new and old.casefold() != new.casefold():
                return Change(old, None, new, verbless=True)
    for n, rx in enumerate(_SWAPS):
        m = rx.search(clause)
        if m is not None:
            fam, old = _verb_object(m.group(1))
            fam = "own" if n == 0 else fam
            new = thing(m.group(2))
            if old and new and old.casefold() != new.casefold():
                return Change(old, fam, new, verbless=True)
    for rx in _ELLIPTIC:
        m = rx.search(clause)
        if m is not None and not re.match(r"(?i)(?:in|at|to|on|with|from)\b", m.group(1)):
            old = thing(m.group(1))
            if old:
                return Change(old, None, verbless=True)
    m = _CEASE.search(clause)
    if m is not None and not _NOT_CEASED.search(m.group(1)) and not m.group(1).startswith("up"):
        fam, old = _verb_object(m.group(1))
        if old:
            return Change(old, fam)
    m = _USED_TO.search(clause)
    if m is not None:
        verb = m.group(1) or m.group(3)
        obj = thing(m.group(2) or m.group(4) or "")
        fam = family_of_verb(verb, obj)
        if obj and fam is not None:
            return Change(obj, fam)
        if not obj and fam is None and verb.casefold() in _INTRANSITIVE:
            return Change(verb, "do")  # "I used to knit"
    m = _DONE_WITH.search(clause)
    if m is not None and not _NOT_CEASED.search(m.group(1)):
        fam, old = _verb_object(m.group(1))
        if old:
            return Change(old, fam)
    m = _PART_WITH.search(clause)
    if m is not None:
        old = thing(m.group(1))
        if old:
            return Change(old, "own")
    m = _NEGATED.search(clause)
    if m is not None:
        verb = m.group(1) or m.group(3)
        rest = m.group(2) or m.group(4) or ""
        obj = thing(rest)
        fam = family_of_verb(verb, obj)
        if obj and fam is not None and fam != "pref":
            return Change(obj, fam)
        if (
            not obj
            and fam is None
            and verb.casefold().endswith("ing")
            and _ANYMORE.search(clause)
            and verb.casefold() not in ("doing", "going", "working", "living")
        ):
            return Change(verb, "do")  # "I'm not knitting any more"
        if fam == "pref" and obj and _ANYMORE.search(clause):
            return Change(obj, "pref")
    return None


def instead_of(clause: str) -> str:
    """The thing "instead of X" / "rather than X" sets aside in ``clause`` ("" when none)."""
    m = _INSTEAD.search(clause)
    return thing(m.group(1)) if m else ""


def positive_slot(clause: str, category: str) -> str:
    """The object slot of a positive fact of ``category`` (diet, hobby, possession), or ""."""
    if category == "diet":
        m = _rx(r"\b(?:i|we)(?:'ve| have)?(?: \w+)? (eat|drink|have|take|consume)\s+(.+)$").search(
            clause
        )
        if m is None:
            return ""
        obj = thing(m.group(2))
        fam = family_of_verb(m.group(1), obj)
        return slot_of("consume", obj) if obj and fam == "consume" else ""
    if category == "hobby":
        m = _rx(
            r"\b(?:i|we)(?:'ve| have)?(?: \w+ly| also| still| often| sometimes)? (?:been )?"
            r"(play|plays|playing|practi[cs]e|do) (.+)$"
        ).search(clause)
        if m is not None:
            obj = thing(m.group(2))
            return slot_of("do", obj) if obj else ""
        m = _rx(r"\b(?:i|we) (?:\w+ )?(?:go|went) (\w+ing)\b").search(clause)
        if m is not None:
            return slot_of("do", m.group(1))
        m = _rx(
            r"\b(?:i|we)(?:'ve| have)?(?: \w+ly| also| still| often| sometimes)? (?:been )?"
            r"(knit|crochet|sew|paint|draw|sketch|swim|surf|ski|snowboard|skate|climb|hike|"
            r"cycle|garden|fish|sing|dance|bake|brew|meditate|row|box|fence|juggle|run|jog)"
            r"(?:s|ing)?\b"
        ).search(clause)
        return slot_of("do", m.group(1)) if m else ""
    if category == "possession":
        m = _rx(
            r"\b(?:i|we)(?:'ve| have)?(?: \w+)? (own|drive|ride|have|use|got|bought|'ve got)"
            r"\s+(.+)$"
        ).search(clause)
        if m is None or _rx(r"\b(?:don't|do not|no longer|never)\b").search(clause):
            m = _rx(
                r"\b(?:i|we) (?:don't|do not|no longer|never) (own|drive|ride|have|use)\s+(.+)$"
            ).search(clause)
        if m is None:
            return ""
        obj = thing(m.group(2))
        return slot_of("own", obj) if obj else ""
    return ""


def family_of_slot(slot: str) -> str | None:
    """The family of an object slot ("andrew/consume:tea" -> "consume"), None for others."""
    head = slot.rsplit("/", 1)[-1].split(":", 1)[0]
    return head if head in FAMILIES else None


def rewrite(held: str, subject: str, old: str, new: str) -> str:
    """The held fact with ``old`` replaced by ``new`` (or taken back when ``new`` is "").

    "User drinks espresso every morning", "espresso", "decaf" -> "User drinks decaf";
    "User likes jazz", "jazz", "" -> "User no longer likes jazz".  "" when the held
    fact does not read "<subject> <verb> ...".
    """
    if not held.startswith(subject + " "):
        return ""
    rest = held[len(subject) + 1 :]
    if not new:
        rest = re.sub(r"^(?:does not|doesn't|no longer|now|still) ", "", rest)
        return f"{subject} no longer {rest}"
    k = key(old)
    m = re.search(rf"(?i)\b{re.escape(old)}\b", rest) or (
        re.search(rf"(?i)\b{re.escape(k)}\w*", rest) if k else None
    )
    if m is None:
        return ""
    head = rest[: m.start()]
    head = re.sub(r"(?i)\b(?:does not|doesn't|no longer) (\w+)", _affirm, head)
    if re.search(r"(?i)\ban $", head) and not re.match(r"(?i)[aeiou]", new):
        head = head[:-3] + "a "
    elif re.search(r"(?i)\ba $", head) and re.match(r"(?i)[aeiou]", new):
        head = head[:-2] + "an "
    return f"{subject} {head}{new}"


def _affirm(m: re.Match[str]) -> str:
    verb = m.group(1)
    if verb.casefold() == "have":
        return "has"
    if verb.endswith(("s", "sh", "ch", "x", "o")):
        return verb + "es"
    return verb + "s"


# -- facts ---------------------------------------------------------------------------------------

_OBJECT_CATEGORIES: Final = frozenset({"diet", "hobby", "possession", "like", "dislike"})


def _prefixed(slot: str, subject: str) -> str:
    return f"{subject.casefold()}/{slot}" if subject != "User" and slot else slot


def amend(fact: ExtractedFact, clause: str, subject: str, change: Change | None) -> ExtractedFact:
    """A rule's fact with its object slot, and what it takes back or replaces.

    ``fact`` already has the speaker's slot prefix; ``change`` is
    :func:`change_of` of the clause.
    """
    category = fact.tags[0] if fact.tags else ""
    if category not in _OBJECT_CATEGORIES:
        return fact
    if change is not None and change.new:
        return swap_fact(change, subject, fact.source_ids, fallback=fact)
    if change is not None:
        retract = tuple(_prefixed(s, subject) for s in change.retract)
        slot = fact.slot or (retract[0] if change.family is not None and retract else "")
        return msgspec.structs.replace(
            fact,
            slot=slot,
            replaces=tuple(s for s in retract if s != slot),
            retraction=True,
        )
    slot = fact.slot
    if not slot:
        slot = _prefixed(positive_slot(clause, category), subject)
    replaces: tuple[str, ...] = ()
    aside = instead_of(clause)
    if aside:
        family = family_of_slot(slot)
        found = (slot_of(family, aside),) if family is not None else every_family(aside)
        replaces = tuple(_prefixed(s, subject) for s in found if s)
    return msgspec.structs.replace(fact, slot=slot, replaces=replaces)


def swap_fact(
    change: Change,
    subject: str,
    source_ids: tuple[str, ...],
    *,
    fallback: ExtractedFact | None = None,
) -> ExtractedFact:
    """The fact of a swap or a bare retraction that no rule read on its own terms."""
    retract = tuple(_prefixed(s, subject) for s in change.retract)
    if fallback is not None:
        return msgspec.structs.replace(
            fallback,
            slot="",
            replaces=retract,
            swap=(subject, change.old, change.new),
            retraction=not change.new,
        )
    diet = bool(change.new) and any(w.casefold() in _DIET_SET for w in change.new.split())
    if change.new:
        content = f"{subject} now has {change.new}"
    else:
        content = f"{subject} no longer has {change.old}"
    return ExtractedFact(
        content=content,
        kind="fact",
        importance=0.7,
        confidence=0.8,
        tags=("diet" if diet else "correction",),
        replaces=retract,
        retraction=not change.new,
        swap=(subject, change.old, change.new),
        if_held=not diet,
        source_ids=source_ids,
    )


def retraction_fact(
    change: Change, clause: str, subject: str, source_ids: tuple[str, ...]
) -> ExtractedFact:
    """The fact of a retraction with a verb that no rule read ("I sold the Volvo")."""
    retract = tuple(_prefixed(s, subject) for s in change.retract)
    slot = retract[0] if change.family is not None and retract else ""
    known = any(w.casefold() in _DIET_SET | _OWN_SET for w in change.old.split())
    return ExtractedFact(
        content=_TRAILING.sub("", third_person(clause, subject)).rstrip(" .!,;:"),
        kind="fact",
        importance=0.6,
        confidence=0.8,
        tags=(
            {"consume": "diet", "do": "hobby", "own": "possession"}.get(
                change.family or "", "correction"
            ),
        ),
        slot=slot,
        replaces=tuple(s for s in retract if s != slot),
        retraction=True,
        if_held=not known,  # "I don't own a car" stands; "I don't have time" corrects or is dropped
        source_ids=source_ids,
    )


def link(facts: list[ExtractedFact]) -> list[ExtractedFact]:
    """Within one message, a new thing of the family a retraction took back replaces it.

    "I stopped playing tennis, I play padel now": the padel fact replaces
    ``do:tennis``.  Each retraction is replaced at most once, by the first
    positive fact of its family that follows it.
    """
    out = list(facts)
    open_: list[int] = []
    for i, f in enumerate(out):
        if f.retraction:
            open_.append(i)
            continue
        family = family_of_slot(f.slot)
        if family is None or f.swap or (f.tags and f.tags[0] == "dislike"):
            continue
        for j in list(open_):
            r = out[j]
            taken = tuple(s for s in (r.slot, *r.replaces) if s)
            families = {family_of_slot(s) for s in taken}
            if f.slot in taken or (len(families) == 1 and family not in families):
                continue
            out[i] = f = msgspec.structs.replace(
                f, replaces=tuple(dict.fromkeys((*f.replaces, *taken)))
            )
            open_.remove(j)
            break
    return out
