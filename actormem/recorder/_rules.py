"""The offline fact extractor: first-person statements in, third-person facts out.

Deterministic, no model, tens of microseconds per message.  A user message
is cut into sentences and each sentence into clauses (at "and I", ", we",
"but my", ...).  Questions never yield facts (a sentence that ends in "?"
or opens like one: "do you remember where I work"), nor do hypotheticals
("If I lived in Oslo ...", "I wonder ..."), one-off requests ("Book me a
table") or small talk ("I think so", "I love that idea").

Each remaining clause goes through the categories below in order, and the
first that recognises it gives its fact:

=============  ==========================================================
category       recognised (examples)
=============  ==========================================================
remember       "remember that my parking spot is B12"
assistant      standing requests about answers: "Always reply in French",
               "Don't use emojis", "I prefer bullet points"
name           "my name is", "call me", "I go by", "Kenji here", "I'm Bea"
age            "I'm 34", "I turned 40", "as a 61-year-old"
home           live / based / settled / moved / relocated in or to a place,
               "home is", "we're in Oslo now" (slot ``location``)
origin         "I'm from", "I grew up in", "I was born in"
plan           a first-person clause about what lies ahead, with a date or
               time ("on June 12", "next Tuesday", "in April", "this weekend")
education      studied, majored, degree, graduated, "a student at"
work           "I work at/for/as", "I'm a nurse" (a known occupation),
               "I joined Stripe", "I run a bakery", "I'm retired"
health         allergies, conditions, diagnoses, medication, injuries
pet            "I have a dog named Max", "my cat Luna", "we adopted a puppy"
diet           vegetarian/vegan/..., "I don't eat meat", "I gave up sugar",
               "I've switched to oat milk", "not espresso any more, now decaf"
language       "I speak", "fluent in", "my native language is"
relationship   married / engaged / single ..., "my girlfriend Mia"
family         "my daughter Lily is five", "I have two kids", "Noah, my oldest"
possession     "I drive a Tesla", "I own a bike", "my car is a Volvo"
dislike        hate, can't stand, not a fan of, don't like, "X is not my thing"
like           love, like, enjoy, big fan of, into, "X is my favourite"
hobby          play, knit, paint, go climbing, "my hobby is", "I'm training for"
correction     a swap or retraction no category above reads: "not X any more,
               now Y", "I switched from X to Y", "I sold the Volvo" (it
               only stands when it corrects a held fact, see ``_corrections``)
=============  ==========================================================

Names, ages, homes, origins, likes and dislikes are phrased from templates
("User lives in Lyon", "User likes jazz"); the other categories keep the
user's own words in the third person ("I have a dog named Max" -> "User has
a dog named Max", "I don't eat meat anymore" -> "User does not eat meat").
Single-valued facts carry a ``slot`` (``name``, ``age``, ``location``,
``origin``, ``employer``, ``occupation``, ``relationship``, ``diet``,
``pref:<thing>``, ...) so that a correction ("we moved to Lyon", "I left
Shopify and joined Stripe") replaces the older fact instead of piling up
beside it.  Facts about a thing one consumes, does, owns or likes carry an
*object slot* (``consume:espresso``, ``do:tennis``, ``own:volvo``,
``pref:jazz``), and a clause that takes such a thing back or swaps it
("I don't eat meat anymore", "I stopped playing tennis, I play padel now",
"I sold the Volvo", "not espresso any more, now decaf", "I switched from
espresso to decaf") names the slots it replaces: ``_corrections.py`` says
how, ``reconcile_by_slot`` updates the held fact.  The category is the
fact's first tag.  A message with a ``name`` is phrased about that name
instead of "User", and its slots are the speaker's own.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Final

from actormem._pace import pace
from actormem.messages import Msg
from actormem.recorder._corrections import amend, change_of, link, retraction_fact, swap_fact
from actormem.recorder._lexicon import (
    _ABOUT_ANSWERS,
    _AHEAD,
    _ANIMALS,
    _DIET,
    _DIET_WORDS,
    _FORMAT_PREFS,
    _FUTURE,
    _HEALTH,
    _HOBBY,
    _LANGUAGES,
    _NAME,
    _NOT_LIKED,
    _NOT_NAMES,
    _OCCUPATIONS,
    _PARTNERS,
    _PAST,
    _PLACE,
    _POSSESSIONS,
    _RELATIVES,
    _STANDING_REQUEST,
    _WHEN,
)
from actormem.recorder._text import (
    _APPOSITIVE,
    _FIRST_PERSON,
    _HYPOTHETICAL,
    _LEADING_FILLER,
    _SENTENCE_RE,
    _TRAILING,
    _clauses,
    _is_question,
    _rx,
    _tidy,
    third_person,
)
from actormem.recorder._types import ExtractedFact

__all__ = ["CATEGORIES", "RuleExtractor", "third_person"]

#: The categories a rule-extracted fact can have (its first tag).
CATEGORIES: Final = tuple(
    [
        "remember",
        "assistant",
        "name",
        "age",
        "home",
        "origin",
        "education",
        "work",
        "health",
        "diet",
        "language",
        "pet",
        "relationship",
        "family",
        "possession",
        "plan",
        "dislike",
        "like",
        "hobby",
        "correction",
    ]
)


# -- the fact builders ---------------------------------------------------------------------------

#: (content, category, slot, importance, confidence)
_Fact = tuple[str, str, str, float, float]
_Rule = Callable[[str, str], "_Fact | None"]


def _name(clause: str, s: str) -> _Fact | None:
    m = re.search(
        rf"\b(?i:my (?:first |full |real )?name(?:'s| is)|the name's|call me|i go by|"
        rf"(?:people|everyone|friends|they) (?:usually |often |all |just )?calls? me|i'm called|"
        rf"i am called"
        rf"|you can call me) ({_NAME}(?: {_NAME}){{0,3}})",
        clause,
    ) or re.match(
        rf"^(?:(?i:i'm|i am|it's|it is|this is) ({_NAME})(?: (?i:speaking|here|again))?"
        rf"(?:\s*,?\s*(?i:by the way))?(?:$|,)|({_NAME}) (?i:here|speaking)(?:$|,)|"
        rf"({_NAME})(?i:'s my name| is my name)\b)",
        clause,
    )
    if m is None:
        return None
    name = next(g for g in m.groups() if g)
    if name in _NOT_NAMES or name.casefold() in ("i", "me"):
        return None
    return (f"{s}'s name is {name}", "name", "name", 0.9, 0.9)


def _age(clause: str, s: str) -> _Fact | None:
    m = _rx(
        r"\b(?:i(?:'m| am) (\d{1,3})(?: years? old| yrs? old| y/o)?$|i(?:'m| am) (\d{1,3})"
        r"(?: years? old| yrs? old)?(?:\s+(?:and|but|so|now|today)\b|\s*[,;])|"
        r"i(?:'m| am) (\d{1,3}) years? old\b|"
        r"i (?:just )?turned (\d{1,3})\b|as an? (\d{1,3})[- ]year[- ]old\b|"
        r"i'll be (\d{1,3}) (?:on|in|next)\b)"
    ).search(clause)
    if m is None:
        return None
    age = next(g for g in m.groups() if g)
    if not 1 <= int(age) <= 120:
        return None
    return (f"{s} is {age} years old", "age", "age", 0.8, 0.85)


_HOME_RX: Final = (
    re.compile(
        rf"\b(?i:(?:i|we)(?: now| currently| still)? (?:live|reside)|(?:i'm|i am|we're|we are)"
        rf"(?: now| currently)? (?:living|based|settled|staying for good)(?: out)?|"
        rf"(?:i|we)(?:'ve| have) (?:been living|lived)|(?:(?:i|we)(?:'ve| have)?|and)"
        rf"(?: just| recently| finally| already| then)? (?:settled|moved(?: from {_PLACE})?|"
        rf"relocated(?: from {_PLACE})?)(?: back)?) (?i:in|to|of) {_PLACE}"
    ),
    re.compile(
        rf"\b(?i:home(?: for me| for us)? is|my home is in|(?:my|our) (?:flat|apartment|house|"
        rf"place|condo) is in|i (?:rent|own|have) (?:a |an )?(?:small |little |tiny |big )?"
        rf"(?:flat|apartment|house|place|condo) in) {_PLACE}"
    ),
    re.compile(
        rf"^{_PLACE} (?i:is where (?:i|we) live|(?:has been|is|'s been) (?:my |our )?home)\b"
    ),
    re.compile(
        rf"^(?i:now )?(?i:i'm|i am|we're|we are) (?i:now )?(?i:in) {_PLACE}(?: (?i:now)\b)?"
    ),
)


def _home(clause: str, s: str) -> _Fact | None:
    negated = _rx(r"\b(?:don't|do not|no longer|never|not|didn't|won't)\b").search(clause)
    if negated and not _rx(r"\bnow\b").search(clause):
        return None
    if _HOME_RX[3].search(clause) and not _rx(r"\bnow\b").search(clause):
        return None  # "I'm in Rome" alone is a trip; "we're in Oslo now" is a home
    for rx in _HOME_RX:
        m = rx.search(clause)
        if m is not None:
            place = [g for g in m.groups() if g][-1]
            if place in _NOT_NAMES:
                continue
            return (f"{s} lives in {place}", "home", "location", 0.7, 0.9)
    return None


def _origin(clause: str, s: str) -> _Fact | None:
    m = re.search(
        rf"\b(?i:i'm (?:originally )?from|i am (?:originally )?from|i come from|i grew up "
        rf"(?:[\w ]{{1,30}}? )?in|i (?:grew up|"
        rf"was born|was raised|was born and raised|was born and grew up) in|my family "
        rf"(?:is|comes) (?:originally )?from) {_PLACE}",
        clause,
    )
    if m is None or m.group(1) in _NOT_NAMES:
        return None
    return (f"{s} is from {m.group(1)}", "origin", "origin", 0.6, 0.85)


_EDUCATION: Final = _rx(
    r"\bi (?:studied|study|majored|minored|graduated|did my|got my|earned|hold|went to "
    r"(?:college|university|school|uni)|dropped out)\b|\bi(?:'m| am) (?:studying|doing|"
    r"finishing|pursuing|in my \w+ year|a (?:student|freshman|sophomore|junior|senior|"
    r"undergrad|grad student|postdoc))\b.*\b(?:degree|master's|bachelor's|phd|school|"
    r"college|university|course|program|\w+ology|law|medicine|at [A-Z])|"
    r"\bi(?:'m| am) studying\b|\bi (?:have|hold) an? (?:degree|bachelor's|master's|phd|"
    r"doctorate|diploma|mba)\b|\ba (?:student|freshman|sophomore) at\b"
)


def _education(clause: str, s: str) -> _Fact | None:
    if not _EDUCATION.search(clause):
        return None
    return (third_person(clause, s), "education", "", 0.6, 0.8)


_WORK_RX: Final = _rx(
    rf"\bi(?:'ve| have)?(?: now| currently| always)? work(?:ed)? (?:\w+ ){{0,2}}"
    rf"(?:at|for|as|in|from)\b|"
    rf"\bi(?:'m| am) (?:now |currently )?working (?:at|for|as|in)\b|"
    rf"\bi(?:'m| am) employed\b|\bi (?:just )?got (?:a job|hired|a position)\b|"
    rf"\bjoined [A-Z]|\bi (?:run|own|manage) (?:a |an |my own )?(?:\w+ )?(?:bakery|shop|"
    rf"store|business|company|restaurant|cafe|café|bar|startup|studio|salon|clinic|farm|"
    rf"agency|practice)\b|\bi(?:'m| am) (?:now )?(?:retired|unemployed|self-employed|"
    rf"between jobs|out of work|a stay-at-home)\b|\bmy job is\b|\bi teach\b|"
    rf"\b(?:i'm|i am|now i'm|i've been|i have been|i was) (?:an? |the )?(?:[\w-]+ ){{0,2}}"
    rf"(?:{_OCCUPATIONS})s?\b|"
    rf"\bi (?:quit|left) my job\b"
)


_STARTED_WORK: Final = _rx(
    r"\bi(?:'ve| have)? (?:just |recently )?(?:started|begun|began) (?:working|a (?:new )?job|"
    r"work) (?:at|for|as|in)\b|\bi (?:was|got|just got) promoted\b"
)


def _work(clause: str, s: str) -> _Fact | None:
    moved = re.search(
        rf"\b(?i:left|quit) (?:my job at )?{_PLACE},? (?i:and |to )?(?i:joined|join|"
        rf"started at|start at|now work at|went to) {_PLACE}",
        clause,
    )
    if moved is not None:
        return (f"{s} works at {moved.group(2)}", "work", "employer", 0.7, 0.85)
    if not _WORK_RX.search(clause) and not _STARTED_WORK.search(clause):
        return None
    if _rx(r"\b(?:fan|friend|neighbou?r|boss|colleague) of\b|\blike an?\b").search(clause):
        return None
    text = third_person(clause, s)
    text = re.sub(rf"^{re.escape(s)} teaches at (.+)$", rf"{s} is a teacher at \1", text)
    employer = re.search(rf"\b(?:at|for|by|joined) {_PLACE}", clause)
    if _rx(r"\b(?:as|an? |the )\b").search(clause) and not employer:
        slot = "occupation"
    elif employer:
        slot = "employer"
    else:
        slot = "occupation"
    return (text, "work", slot, 0.7, 0.85)


def _health(clause: str, s: str) -> _Fact | None:
    if not _HEALTH.search(clause) or not _FIRST_PERSON.search(clause):
        return None
    m = _rx(r"\bi(?:'m| am) allergic to (.+)$").search(clause)
    slot = f"allergy:{_clean_value(m.group(1)).casefold()}" if m else ""
    return (third_person(clause, s), "health", slot, 0.85, 0.85)


_DIET_TYPES: Final = _rx(
    r"\b(vegetarian|vegan|pescatarian|pescetarian|keto|paleo|halal|kosher|plant-based)\b"
)


def _diet(clause: str, s: str) -> _Fact | None:
    m = _rx(
        r"^not (?:\w+ )?(.+?) any ?more,? (?:now )?(?:it's |i'm |i |we )?(?:on |drinking |"
        r"eating )?(.+?)(?: for me| instead)?$"
    ).search(clause)
    if m is not None and re.search(rf"\b(?:{_DIET_WORDS})\b", clause, re.IGNORECASE):
        return (f"{s} now has {_clean_value(m.group(2))}", "diet", "", 0.7, 0.8)
    if not _DIET.search(clause):
        return None
    if _rx(r"\b(?:like|love|enjoy|hate|prefer)\b").search(clause):
        return None
    kind = _DIET_TYPES.search(clause)
    slot = "diet" if kind and not _rx(r"\b(?:not|don't|no longer)\b").search(clause) else ""
    return (third_person(clause, s), "diet", slot, 0.8, 0.85)


def _language(clause: str, s: str) -> _Fact | None:
    m = re.search(
        rf"\b(?:{_LANGUAGES})\b|\b(?i:\w+ languages|sign language|asl|bsl)\b",
        clause,
    )
    if m is None:
        return None
    if not _rx(
        r"\b(?:speak|speaking|spoke|fluent|native|mother tongue|first language|learn|learning|"
        r"get by|study|studying|bilingual)\b"
    ).search(clause):
        return None
    if _rx(r"^(?:please |always |only )?(?:reply|answer|respond|write|talk|speak)\b").search(
        clause
    ):
        return None
    return (third_person(clause, s), "language", "", 0.6, 0.85)


#: "we have a parakeet named Sunny": something you have that has a name is most often a pet.
_NAMED_PET: Final = re.compile(
    rf"\b(?i:i|we)(?:'ve| have)? (?i:have|got|adopted|rescued|'ve got|have got) (?i:an?|one|two|"
    rf"three) (?:\w+ )?(?:\w+) (?i:named|called) {_NAME}"
)


_RELATIVE_RX: Final = re.compile(rf"\b(?:{_RELATIVES}|{_PARTNERS})\b", re.IGNORECASE)


def _pet(clause: str, s: str) -> _Fact | None:
    owned = _rx(
        rf"\b(?:i|we|my \w+|our \w+)(?:'ve| have| has)? (?:\w+ )?(?:have|has|own|owns|keep|"
        rf"got|adopted|rescued|bought|'ve got|have got|had)\b.*\b(?:{_ANIMALS})\b|"
        rf"\b(?:my|our) (?:\w+ )?(?:{_ANIMALS})\b|\b(?:{_ANIMALS}), (?:my|our)\b|"
        rf"\bmy (?:\w+ )?pets?\b|\b(?:have|own) (?:any |no )?pets\b"
    ).search(clause)
    if owned is None and (_NAMED_PET.search(clause) is None or _RELATIVE_RX.search(clause)):
        return None
    if _rx(r"\b(?:allergic|afraid|scared|want|wish|like|love|hate)\b").search(clause) and not (
        _rx(r"\b(?:named|called)\b").search(clause)
    ):
        return None
    return (third_person(clause, s), "pet", "", 0.6, 0.85)


_STATUS: Final = _rx(
    r"\bi(?:'m| am) (?:happily |newly |recently |now |currently |still )?(?:married|engaged|"
    r"single|divorced|widowed|separated)\b|\b(?:i|we) (?:just |recently )?got (?:married|"
    r"engaged|divorced)\b"
)
_TOGETHER: Final = _rx(
    r"\bmy (?:husband|wife|partner|girlfriend|boyfriend|fianc\w+) and i\b|"
    r"\b(?:been|are|were) together\b"
)
_PARTNER_RX: Final = re.compile(
    rf"\b(?:my|our) (?:{_PARTNERS})\b|\bi(?:'ve| have)? (?:got )?an? (?:{_PARTNERS})\b|"
    rf"\bi(?:'m| am) dating\b",
    re.IGNORECASE,
)


def _relationship(clause: str, s: str) -> _Fact | None:
    if _STATUS.search(clause):
        return (third_person(clause, s), "relationship", "relationship", 0.7, 0.85)
    if _TOGETHER.search(clause) or _PARTNER_RX.search(clause):
        return (third_person(clause, s), "relationship", "", 0.6, 0.8)
    return None


def _family(clause: str, s: str) -> _Fact | None:
    if not re.search(
        rf"^(?:my|our) (?:(?:little|big|older|younger|baby|twin|step|late|oldest|youngest|"
        rf"eldest|two|three) )?(?:{_RELATIVES})\b|\b(?:i|we)(?:'ve| have)?(?: just| recently)? "
        rf"(?:have|had|got|'ve got)"
        rf" (?:a |an |\w+ )?(?:{_RELATIVES})\b|\bi(?:'m| am) an only child\b|"
        rf", my (?:{_RELATIVES}),",
        clause,
        re.IGNORECASE,
    ):
        return None
    if _rx(r"^my (?:family|kids|children) (?:and i|&)\b").search(clause):
        return None
    return (third_person(clause, s), "family", "", 0.7, 0.85)


def _possession(clause: str, s: str) -> _Fact | None:
    if not re.search(
        rf"\b(?:i|we|my family|my parents)(?:'ve| have)? (?:\w+ )?(?:have|has|own|owns|drive|"
        rf"ride|got|bought|read on|use|'ve got|have got|don't have|do not have)\b"
        rf".*\b(?:{_POSSESSIONS})\b|\bmy (?:{_POSSESSIONS}) is\b",
        clause,
        re.IGNORECASE,
    ):
        return None
    return (third_person(clause, s), "possession", "", 0.5, 0.8)


def _plan(clause: str, s: str) -> _Fact | None:
    if not _WHEN.search(clause) or not _FIRST_PERSON.search(clause):
        return None
    if (
        not _FUTURE.search(clause)
        and not _rx(r"\b(?:birthday|anniversary)\b").search(clause)
        and not _AHEAD.search(clause)
    ):
        return None
    if _PAST.search(clause):
        return None
    return (third_person(clause, s), "plan", "", 0.7, 0.8)


_DISLIKE_RX: Final = (
    _rx(
        r"\bi (?:really |truly |absolutely |just )?(?:hate|dislike|detest|loathe|can't stand|"
        r"cannot stand|can't bear|cannot bear)\s+(.+)$"
    ),
    _rx(r"\bi(?:'m| am) (?:really )?not (?:a (?:big |huge )?fan of|into|keen on)\s+(.+)$"),
    _rx(
        r"\bi (?:really |just |honestly |truly )?(?:do not|don't|dont|never|didn't) "
        r"(?:really )?(?:like|liked|enjoy|love)\s+(.+)$"
    ),
    _rx(r"^(.+?) (?:is|are) (?:not my thing|not for me|the worst|awful|terrible)$"),
)
_LIKE_RX: Final = (
    _rx(r"\bmy (?:all-time )?(favou?rite [a-z]+(?: [a-z]+){0,3}?) (?:is|are) (.+)$"),
    _rx(
        r"^(.+?) (?:is|are) my (?:all-time )?(favou?rite(?: [a-z]+){0,4})"
        r"(?: of all time)?$"
    ),
    _rx(
        r"\bi (?:really |truly |absolutely |just |also |totally )?(?:love|like|enjoy|adore|"
        r"prefer|dig)\s+(.+)$"
    ),
    _rx(
        r"\bi(?:'m| am) (?:a (?:big |huge )?fan of|(?:really |totally )?(?:into|obsessed with|"
        r"hooked on|crazy about|passionate about|fond of))\s+(.+)$"
    ),
    _rx(r"^(.+?) (?:makes?|make) me (?:so |really )?happy$"),
)


def _clean_value(value: str) -> str:
    value = value.strip().strip("\"'`").strip()
    value = re.sub(
        r"\s+(?:too|as well|now|any ?more|any longer|no more|these days|though|anyway|actually|"
        r"a lot|so much|very much|recently|"
        r"yesterday|today|(?:last|this|next) (?:week|month|year)|in \d{4}|since \d{4}|"
        r"for (?:\w+ )?years?|more than \w+|over \w+|most of all)$",
        "",
        value,
        flags=re.IGNORECASE,
    )
    return value.rstrip(" .!,")


def _vague(thing: str) -> bool:
    """ "that", "the idea", "your plan": what is liked is only said elsewhere."""
    words = thing.casefold().split()
    if words[0] in ("the", "a", "an") and len(words) > 1:
        return words[1] in _NOT_LIKED
    return words[0] in _NOT_LIKED


def _dislike(clause: str, s: str) -> _Fact | None:
    for rx in _DISLIKE_RX:
        m = rx.search(clause)
        if m is None:
            continue
        thing = _clean_value(m.group(1))
        if not thing or _vague(thing):
            return None
        thing = third_person(thing, s, capital=False)
        return (f"{s} dislikes {thing}", "dislike", f"pref:{thing.casefold()}", 0.6, 0.85)
    return None


def _like(clause: str, s: str) -> _Fact | None:
    for i, rx in enumerate(_LIKE_RX):
        m = rx.search(clause)
        if m is None:
            continue
        if i == 0:
            what, value = m.group(1), _clean_value(m.group(2))
            return (f"{s}'s {what} is {value}", "like", f"my:{what.casefold()}", 0.6, 0.9)
        if i == 1:
            value, what = _clean_value(m.group(1)), m.group(2)
            return (f"{s}'s {what} is {value}", "like", f"my:{what.casefold()}", 0.6, 0.85)
        thing = _clean_value(m.group(1))
        if not thing or _vague(thing):
            return None
        if re.match(r"(?i)to\b", thing):
            return None
        thing = third_person(thing, s, capital=False)
        return (f"{s} likes {thing}", "like", f"pref:{thing.casefold()}", 0.6, 0.8)
    return None


def _hobby(clause: str, s: str) -> _Fact | None:
    if not _HOBBY.search(clause):
        return None
    return (third_person(clause, s), "hobby", "", 0.6, 0.8)


def _assistant(clause: str, s: str) -> _Fact | None:
    low = clause.casefold()
    if _STANDING_REQUEST.search(clause) and _ABOUT_ANSWERS.search(clause):
        standing = re.search(
            r"\b(?:from now on|when you can|whenever (?:you can|possible)|in (?:the )?future|"
            r"going forward|in general|always|never)\b",
            low,
        )
        if (
            not standing
            and not re.search(r"\byour (?:answers|replies|responses|tone|style)\b", low)
            and re.match(r"(?:please )?(?:show|include|make|try)\b", low)
        ):
            return None
        if re.search(r"\b(?:this|that|these|it)\b", low) and not standing:
            return None
        return (f"{s} asked the assistant: {clause}", "assistant", "", 0.8, 0.85)
    if re.search(r"\bi(?:'d| would) rather you\b", low) or (
        re.search(r"\bi prefer\b", low) and _FORMAT_PREFS.search(clause)
    ):
        return (f"{s} asked the assistant: {clause}", "assistant", "", 0.8, 0.85)
    return None


def _remember(clause: str, s: str) -> _Fact | None:
    m = _rx(r"^(?:please )?remember (?:that )?(.{3,200})$").search(clause)
    if m is None:
        return None
    return (third_person(m.group(1), s), "remember", "", 0.8, 0.9)


_ORDER: Final[tuple[_Rule, ...]] = (
    _remember,
    _assistant,
    _name,
    _age,
    _home,
    _origin,
    _plan,
    _education,
    _work,
    _health,
    _pet,
    _diet,
    _language,
    _relationship,
    _family,
    _possession,
    _dislike,
    _like,
    _hobby,
)


def _lex(text: str) -> frozenset[str]:
    """The words of a regex alternation (``_alt`` output) or a plain list, casefolded."""
    return frozenset(w.casefold() for w in re.split(r"[|\s\\]+", text) if w)


#: A rule runs only on a clause that has one of its words (None: always runs).  Most
#: clauses of a conversation state nothing; this keeps the extractor fast.
_TRIGGERS: Final[dict[_Rule, frozenset[str] | None]] = {
    _remember: frozenset({"remember"}),
    _assistant: None,
    _name: _lex("name name's call calls go here speaking i'm am it's is this"),
    _age: None,  # gated by a digit below
    _home: _lex(
        "live lives lived living reside based settled moved relocated home flat apartment house "
        "place condo now where"
    ),
    _origin: _lex("from grew born raised"),
    _plan: _lex(
        "jan january feb february mar march apr april may jun june jul july aug august sep "
        "sept september oct october nov november dec december monday tuesday wednesday "
        "thursday friday saturday sunday tomorrow tonight next coming week weekend month "
        "year summer winter spring fall autumn days weeks months"
    ),
    _education: _lex(
        "studied study studying majored minored graduated degree student school college "
        "university uni phd mba master's bachelor's did got earned hold went dropped doing "
        "finishing pursuing freshman sophomore junior senior undergrad postdoc diploma "
        "doctorate"
    ),
    _work: _lex(
        "work worked working employed job hired joined run own manage retired unemployed "
        "self-employed teach left quit between out stay-at-home promoted started began begun"
    )
    | _lex(_OCCUPATIONS)
    | frozenset(w.casefold() + "s" for w in _lex(_OCCUPATIONS)),
    _health: _lex(
        "allergic allergy allergies intolerant intolerance diabetes diabetic asthma asthmatic "
        "migraine migraines surgery operation diagnosed diagnosis medication medicine insulin "
        "pregnant pregnancy penicillin pain hay blood celiac coeliac broke broken sprained "
        "fractured wheelchair injury injured injuries disease illness condition cancer "
        "depression anxiety arthritis physio physiotherapy chronic disability disabled hearing "
        "inhaler epilepsy epileptic cholesterol therapy sick recovering eczema thyroid "
        "concussion cast glasses contacts lenses braces pacemaker adhd autism autistic dyslexia "
        "dyslexic ocd ptsd bipolar ibs crohn's crohn lupus copd covid insomnia apnea tinnitus "
        "gout anemia anaemia hypertension endometriosis pcos"
    ),
    _pet: _lex(_ANIMALS) | frozenset({"pet", "pets", "named", "called"}),
    _diet: _lex(_DIET_WORDS.replace("-", " ")) | frozenset({"plant-based", "low-carb", "milk"}),
    _language: _lex(_LANGUAGES) | frozenset({"languages", "language", "asl", "bsl"}),
    _relationship: _lex(
        "married engaged single divorced widowed separated girlfriend boyfriend partner together "
        "fiancé fiancée fiance fiancee spouse dating ex-wife ex-husband"
    ),
    _family: _lex(_RELATIVES) | frozenset({"only", "twin"}),
    _possession: _lex(_POSSESSIONS),
    _dislike: _lex(
        "hate dislike detest loathe stand bear fan into keen like liked enjoy love thing "
        "worst awful terrible for"
    ),
    _like: _lex(
        "favorite favourite love like enjoy adore prefer dig fan into obsessed hooked crazy "
        "passionate fond happy"
    ),
    _hobby: _lex(
        "play played playing practice practise knit crochet sew paint draw sketch swim surf "
        "ski snowboard skate climb hike cycle bike garden fish sing dance bake brew meditate "
        "row box fence juggle write code program run jog walk go went hobby hobbies passion "
        "side training take started joined class classes lessons course club can good great "
        "decent thing spend do"
    ),
}
_HYPOTHETICAL_WORDS: Final = _lex(
    "if when once unless suppose imagine maybe perhaps wonder wish love like not curious "
    "looking thinking guess think hope sure"
)
#: A clause can take something back only with one of these words (see ``_corrections``).
_CHANGE_WORDS: Final = _lex(
    "stopped quit quitted gave given ditched dropped kicked cut abandoned sold rid away donated "
    "traded scrapped totaled totalled wrote switched moved changed went gone converted "
    "upgraded downgraded transitioned graduated replaced substituted swapped exchanged not "
    "no don't dont never can't cannot out instead rather place longer off done through over "
    "finished used haven't hadn't history"
)
_DIGIT: Final = re.compile(r"\d")
_WORD_RE: Final = re.compile(r"[a-z0-9\u00c0-\u024f'-]+")

#: Rules that may fire on a clause without I/me/my/we ("Kenji here", "Mushrooms are the worst").
_IMPERATIVE_OK: Final = (_remember, _assistant, _name, _age, _dislike)


class RuleExtractor:
    """Offline extractor of first-person facts (see the module docstring).

    Only user messages are read.  Deterministic.

    Args:
        min_confidence: Facts below this confidence are left out.
    """

    name = "rules"

    def __init__(self, *, min_confidence: float = 0.0) -> None:
        self._min_confidence = min_confidence

    def extract(self, turns: Sequence[Sequence[Msg]]) -> list[ExtractedFact]:
        """The facts stated by the user in ``turns``, in order, without exact repeats.

        Args:
            turns: Turns, each a sequence of messages.

        Returns:
            The facts.
        """
        out: list[ExtractedFact] = []
        seen: set[str] = set()
        for turn in turns:
            for msg in turn:
                if msg.role != "user":
                    continue
                pace()
                text = msg.text
                if not text:
                    continue
                subject = " ".join(msg.name.split()) or "User"
                for fact in self.from_text(text, subject, (msg.id,)):
                    key = fact.content.casefold()
                    if key in seen or fact.confidence < self._min_confidence:
                        continue
                    seen.add(key)
                    out.append(fact)
        return out

    def from_text(
        self, text: str, subject: str = "User", source_ids: tuple[str, ...] = ()
    ) -> list[ExtractedFact]:
        """The facts in one message's ``text``, about ``subject``."""
        found: list[ExtractedFact] = []
        for raw in _SENTENCE_RE.findall(text):
            pace()
            sentence = _LEADING_FILLER.sub("", raw.strip()).strip()
            if len(sentence) < 4 or _is_question(sentence):
                continue
            appositive = _APPOSITIVE.match(sentence)
            if appositive is not None:
                sentence = appositive.expand(r"\2 \3 \1 \4")
            for clause in _clauses(sentence):
                pace()  # a long sentence of many ';' clauses held the GIL for 7-8 ms
                clause = _tidy(clause)
                if len(clause) < 4 or _is_question(clause):
                    continue
                words = set(_WORD_RE.findall(clause.casefold()))
                words.update([w[:-2] for w in words if w.endswith("'s")])
                words.update([p for w in words if "-" in w for p in w.split("-")])
                if not words.isdisjoint(_HYPOTHETICAL_WORDS) and _HYPOTHETICAL.search(clause):
                    continue
                first_person = bool(_FIRST_PERSON.search(clause))
                has_digit = _DIGIT.search(clause) is not None
                change = change_of(clause) if not words.isdisjoint(_CHANGE_WORDS) else None
                for rule in _ORDER:
                    if not first_person and rule not in _IMPERATIVE_OK:
                        continue
                    trigger = _TRIGGERS[rule]
                    digit_ok = rule is _plan and has_digit  # "on the 14th"
                    if trigger is not None and words.isdisjoint(trigger) and not digit_ok:
                        continue
                    if rule is _age and not has_digit:
                        continue
                    fact = rule(clause, subject)
                    if fact is None:
                        continue
                    content, category, slot, importance, confidence = fact
                    content = _TRAILING.sub("", content).rstrip(" .!,;:")
                    content = re.sub(rf"^(?i:now),? (?={re.escape(subject)}\b)", "", content)
                    if subject != "User" and slot:
                        slot = f"{subject.casefold()}/{slot}"
                    extracted = ExtractedFact(
                        content=content,
                        kind="preference" if category in ("like", "dislike") else "fact",
                        importance=importance,
                        confidence=confidence,
                        tags=(category,),
                        slot=slot[:200],
                        source_ids=source_ids,
                    )
                    found.append(amend(extracted, clause, subject, change))
                    break
                else:
                    if (change is not None and change.new) or (
                        change is not None and change.verbless
                    ):
                        found.append(swap_fact(change, subject, source_ids))
                    elif change is not None and first_person:
                        found.append(retraction_fact(change, clause, subject, source_ids))
        return link(found)
