"""Text helpers of the offline fact extractor: sentences, clauses, first to third person.

Kept apart from the rules (``_rules.py``) and their word lists (``_lexicon.py``)
so that each reads in one sitting.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["third_person"]


def _split(text: str) -> list[str]:
    return text.split()


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


def _alt(text: str) -> str:
    """A regex alternation of the words of ``text``, longest first."""
    return "|".join(sorted((re.escape(w) for w in text.split()), key=len, reverse=True))


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


# -- sentences, clauses, questions --------------------------------------------------------------

_SENTENCE_RE: Final = re.compile(r"[^.!?\n]+(?:[.!?]+|$)")
_CLAUSE_SPLIT: Final = re.compile(
    r"\s*(?:[,;]\s*(?:and\s+|but\s+|so\s+|though\s+|plus\s+)?|\s(?:and|but|so|though|although"
    r"|while|because|plus)\s+)(?=(?:now\s+|then\s+)?(?:I|I'm|I've|I'd|I'll|we|we're|we've|my|our|My|Our|We)\b)"
)
_QUESTION_OPENERS: Final = _rx(
    r"^(?:what|what's|whats|where|where's|who|who's|whom|whose|why|how|how's|which|when|"
    r"do|does|did|can|could|would|should|shall|will|is|are|am|was|were|have|has|may|might|"
    r"isn't|aren't|doesn't|didn't|won't|wouldn't|shouldn't|remind me|tell me|guess what|"
    r"any idea|i wonder|wonder)\b"
)
_HYPOTHETICAL: Final = _rx(
    r"^(?:if|when|once|unless|suppose|imagine|maybe|perhaps)\b|\bi wonder\b|\bi wish\b|"
    r"\bi(?:'d| would) (?:love|like) to\b|\bi'?m (?:not sure|curious|looking for|thinking)\b"
    r"|\bi (?:guess|think|suppose|hope)\b"
)
_FIRST_PERSON: Final = _rx(r"\b(?:I|I'm|I've|I'd|I'll|me|my|mine|we|we're|we've|us|our)\b")
_LEADING_FILLER: Final = _rx(
    r"^(?:(?:hi|hiya|howdy|greetings|yo|hello|hey|well|so|oh|ah|honestly|yeah|yes|yep|okay|"
    r"ok|btw|by the way|"
    r"actually|also|anyway|fun fact|ugh|wow|haha|lol|good news|update|and|but|plus|"
    r"sadly|luckily|finally|nowadays)(?:\s+there)?\s*[,!:.-]*\s+)+"
)
_TRAILING: Final = _rx(
    r"(?:\s*,?\s*(?:by the way|btw|lol|haha|too|as well|though|anyway|actually|"
    r"these days|at the moment|right now|now|anymore|any more|any longer|no more|"
    r"everyone does|all day|just so you know|haha)\s*)+$"
)


#: "Noah, my oldest, is 8" -> "my oldest Noah is 8" (then read like "my son Omar ...").
_APPOSITIVE: Final = re.compile(r"^([A-Z][\w'-]*), ((?i:my|our)) ([\w' -]{2,30}?), ([a-z].*)$")


def _is_question(sentence: str) -> bool:
    s = sentence.strip()
    return s.endswith("?") or bool(_QUESTION_OPENERS.match(s))


def _clauses(sentence: str) -> list[str]:
    parts = [c.strip(" ,;") for c in _CLAUSE_SPLIT.split(sentence) if c.strip(" ,;")]
    out: list[str] = []
    for part in parts:
        # "My husband | and I have been together": a verbless head is not a clause.
        if out and len(out[-1].split()) <= 2 and out[-1].split()[0].casefold() in ("my", "our"):
            out[-1] = f"{out[-1]} and {part}"
        else:
            out.append(part)
    return out


_TRAILING_FILLER: Final = _rx(r"(?:\s*,?\s*(?:btw|by the way|lol|haha|though|anyway|tbh))+$")
#: A clause that opens with one of these verbs has dropped its "I" ("just turned 25").
_SUBJECTLESS: Final = _rx(
    r"^(?:(?:just|recently|finally) (?:turned|moved|started|got|bought|adopted|finished|"
    r"graduated)|turned|moved|started|got|bought|adopted|finished|graduated|living|working|"
    r"been)\b"
)


def _tidy(clause: str) -> str:
    clause = _LEADING_FILLER.sub("", clause.strip()).strip()
    clause = _TRAILING_FILLER.sub("", clause.rstrip(" .!,;:-"))
    if _SUBJECTLESS.match(clause):
        clause = "I " + clause[:1].lower() + clause[1:]
    return clause.rstrip(" .!,;:-")


# -- first person to third person ---------------------------------------------------------------

_ADVERBS: Final = (
    "really just also still usually always never often sometimes now currently actually "
    "finally recently totally absolutely truly mostly rarely only even already definitely "
    "mainly generally basically literally officially last first once"
)
_UNCHANGED: Final = _words(
    "can could will would should might must may did had was went got made took gave bought "
    "broke grew came left ran swam began met saw said told found felt kept lost won wrote sold "
    "spent taught thought brought built drove rode flew fell sat stood became chose ate drank "
    "sang slept woke wore paid heard held led meant sent quit put set cut hit hurt let shut "
    "adopted can't won't didn't wouldn't couldn't shouldn't wasn't mustn't used need ought"
)
_IRREGULAR: Final = {
    "am": "is",
    "are": "is",
    "were": "was",
    "have": "has",
    "do": "does",
    "go": "goes",
    "don't": "does not",
    "dont": "does not",
    "haven't": "hasn't",
    "aren't": "isn't",
    "weren't": "wasn't",
    "'m": "is",
    "'re": "is",
    "'ve": "has",
    "'ll": "will",
    "'d": "would",
}
_SUBJECT_VERB: Final = re.compile(
    rf"\b(?:I|[Ww]e)(?:\s+(?:no longer|{_alt(_ADVERBS)}))*"
    rf"(?:\s+([A-Za-z][A-Za-z']*)|('m|'re|'ve|'ll|'d))\b"
)
_OBJECT_PRONOUNS: Final = (
    (re.compile(r"\b(?:[Mm]y|[Oo]ur|[Mm]ine)\b"), "{}'s"),
    (re.compile(r"\b(?:me|us|myself|ourselves)\b"), "{}"),
)


def _conjugate(verb: str) -> str:
    low = verb.casefold()
    if low in _IRREGULAR:
        return _IRREGULAR[low]
    if low in _UNCHANGED or low.endswith(("ed", "n't")) or not low.isalpha():
        return verb
    if low.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if low.endswith("y") and len(low) > 2 and low[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def third_person(clause: str, subject: str = "User", *, capital: bool = True) -> str:
    """``clause`` about ``subject``: "I don't eat meat" -> "User does not eat meat"."""

    def subject_verb(m: re.Match[str]) -> str:
        whole = m.group(0)
        verb = m.group(1) or m.group(2)
        head = whole[: len(whole) - len(verb)]
        head = re.sub(r"^(?:I|[Ww]e)", subject, head)
        if m.group(2):
            return f"{head.rstrip()} {_conjugate(verb)}"
        return head + _conjugate(verb)

    text = _SUBJECT_VERB.sub(subject_verb, clause)
    text = re.sub(r"\b(?:I|[Ww]e)\b", subject, text)
    for pattern, repl in _OBJECT_PRONOUNS:
        text = pattern.sub(repl.format(subject).replace("\\", "\\\\"), text)
    text = re.sub(r"\bdoes not not\b", "does not", text)
    return text[:1].upper() + text[1:] if capital else text
