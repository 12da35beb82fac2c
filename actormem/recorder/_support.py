"""Is a model's fact supported by the text it came from?

A small model asked for facts in JSON sometimes invents them: "User has a
cat named Whiskers" from a turn about the weather.  Such a fact is worse
than none (it reaches every later prompt), so a model's facts are checked
against the conversation they were extracted from and the ones without
support are dropped.

The check is lexical and deliberately simple (no model judges a model):

* every *name* in the fact (a capitalised word after its first, or a first
  word that is the subject: "Bea moved ...", "Bea's dog ..."), and
  every *number* (in digits or, up to ninety, in words), must occur in the
  source text -- a model may rephrase, but
  it may not bring in a person, place or quantity nobody mentioned;
* of the fact's other content words (stop words, the subject "user" and a
  few relation verbs such as "lives", "likes", "works" set aside), at least
  half must occur in the source, a word counting when it shares its first
  five letters (all of a shorter word) with a source word, so "moved" finds
  "move" and "vegetarian" finds "vegetarians";
* dates are exempt: the extraction prompt asks the model to turn "next
  Friday" into a calendar date, which the text never spells.

A fact with no content word left to check is supported (nothing to invent).
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["SupportChecker", "is_supported"]


def _split(text: str) -> list[str]:
    return text.split()


_TOKEN_RE: Final = re.compile(r"[A-Za-z][A-Za-z'-]*|\d+(?:[.,:/-]\d+)*")
_DATE_WORDS: Final = frozenset(
    _split(
        "january february march april may june july august september october november december "
        "jan feb mar apr jun jul aug sep sept oct nov dec monday tuesday wednesday thursday "
        "friday saturday sunday today tomorrow yesterday tonight morning evening afternoon "
        "night week weekend month year day days weeks months years"
    )
)
_STOP: Final = frozenset(
    _split(
        """a an the and or but if of to in on at by for with from into onto about as than
    then so is am are was were be been being has have had do does did not no nor
    this that these those it its they them their there here he him his she her hers
    we us our you your i me my mine who whom whose which what when where why how
    user user's users assistant very really also too just still now currently
    some any all each every both either neither one ones own same other such
    can could will would should may might must shall
    lives live living lived resides reside located based
    likes like liked loves love loved enjoys enjoy enjoyed prefers prefer preferred
    dislikes dislike disliked hates hate hated favourite favorite fond
    works work working worked job employed employer role position
    named name called known goes go going went gets get got getting
    has have owns own owned possesses keeps
    wants want wanted plans plan planning planned intends hopes
    said says say told tells mentioned mentions stated states noted
    usually often sometimes always never anymore longer more less most least
    new old recently lately soon later before after since until during
    s t d ll re ve m"""
    )
)
_PREFIX: Final = 5
_NUMBER_WORDS: Final = {
    w: str(i)
    for i, w in enumerate(
        _split(
            "zero one two three four five six seven eight nine ten eleven twelve thirteen "
            "fourteen fifteen sixteen seventeen eighteen nineteen twenty"
        )
    )
} | {
    w: str(10 * i)
    for i, w in enumerate(_split("thirty forty fifty sixty seventy eighty ninety"), 3)
}


def _tokens(text: str) -> list[str]:
    return _TOKEN_RE.findall(text)


def _is_date_token(token: str) -> bool:
    low = token.casefold()
    if low in _DATE_WORDS:
        return True
    if re.fullmatch(r"\d{4}-\d{1,2}-\d{1,2}|\d{1,2}[/.]\d{1,2}(?:[/.]\d{2,4})?", token):
        return True
    return bool(re.fullmatch(r"(?:19|20)\d\d|\d{1,2}:\d\d", token)) or low in (
        "st",
        "nd",
        "rd",
        "th",
    )


_MONTHS: Final = frozenset(
    _split(
        "january february march april may june july august september october november december "
        "jan feb mar apr jun jul aug sep sept oct nov dec"
    )
)


def _day_of_month(tokens: list[str], i: int) -> bool:
    """``tokens[i]`` is a day number next to a month name ("June 5", "5th of June")."""
    if not re.fullmatch(r"\d{1,2}(?:st|nd|rd|th)?", tokens[i]):
        return False
    near = [t.casefold() for t in tokens[max(0, i - 1) : i + 3]]
    return any(t in _MONTHS for t in near)


def _is_name_position(tokens: list[str], i: int) -> bool:
    """A capitalised word here is a name: not first, or first as a subject ("Bea moved")."""
    if i > 0:
        return True
    tok = tokens[0]
    if tok.endswith("'s"):
        return True
    return len(tokens) > 1 and tokens[1][:1].islower()


class SupportChecker:
    """Checks facts against one source text (see the module docstring).

    Args:
        source: The text the facts were extracted from.
        subjects: Names that may start a fact without being in the text
            (the speakers, "User").
    """

    def __init__(self, source: str, subjects: tuple[str, ...] = ()) -> None:
        words = {t.casefold() for t in _tokens(source)}
        self._words = words
        self._prefixes = {w[:_PREFIX] for w in words if not w[0].isdigit()}
        self._digits = {w for w in words if w[0].isdigit()}
        self._digits.update(_NUMBER_WORDS[w] for w in words if w in _NUMBER_WORDS)
        self._subjects = {s.casefold() for name in subjects for s in name.split()}
        self._subjects.add("user")

    def _has(self, word: str) -> bool:
        low = word.casefold()
        if low in self._words:
            return True
        if low.endswith("'s") and low[:-2] in self._words:
            return True
        if len(low) >= 3 and low[:_PREFIX] in self._prefixes:
            return True
        # an inflected form of a short source word: "booked" for "book"
        return any(low[:n] in self._words for n in range(4, min(len(low), _PREFIX)))

    def supported(self, fact: str) -> bool:
        """True when ``fact`` has support in the source text."""
        tokens = _tokens(fact)
        content = 0
        found = 0
        for i, tok in enumerate(tokens):
            low = tok.casefold()
            bare = low[:-2] if low.endswith("'s") else low
            if bare in self._subjects or _is_date_token(tok) or _day_of_month(tokens, i):
                continue
            if tok[0].isdigit():
                if tok.casefold() not in self._digits:
                    return False
                continue
            if bare in _STOP:
                continue
            if tok[0].isupper() and _is_name_position(tokens, i) and not self._has(tok):
                return False  # a name nobody said
            content += 1
            found += self._has(tok)
        return content == 0 or found * 2 >= content


def is_supported(fact: str, source: str, subjects: tuple[str, ...] = ()) -> bool:
    """One-off :meth:`SupportChecker.supported` (build a checker to test many facts)."""
    return SupportChecker(source, subjects).supported(fact)
