"""Tasks made from benchmark test tasks the way a generator or a careless copy would make them:
verbatim, reworded (case, punctuation, politeness, word order) and with one parameter changed
(a number, a quoted name, a file name, a spelled-out number, a name written without quotes).
Deterministic: the variant of a task depends on its position only."""

from __future__ import annotations

import re

from shinken.triage.wording import content_words, read, stem

NEW_NAMES = ("Orion", "Marketing", "Zephyr", "Quarterly", "Helvetica")
_APPS = {"VS", "Code", "Chrome", "Google", "GIMP", "LibreOffice", "Libreoffice", "Thunderbird", "VLC", "Writer", "Calc",
         "Impress", "Desktop", "Excel", "Ubuntu", "I", "Python", "PDF", "Word", "PowerPoint", "Gmail", "Firefox"}
_POLITE_HEAD = re.compile(r"^(?:hey,?\s+|hi,?\s+)?(?:(?:could|can|would) you(?: please)?(?: kindly)?"
                          r"(?: help me(?: to)?| assist me(?: in| to| with)?| help)?|please(?: help me(?: to)?)?"
                          r"|help me(?: to)?|i want to|i'd like to)\s+", re.I)
_TAIL = re.compile(r"\s*(?:thanks|thank you)[!.]*\s*$|\s*(?:can|could) you help me\?\s*$", re.I)
_TRAILING_PHRASE = re.compile(r"^(?P<head>.+?)\s+(?P<tail>(?:in|on|for|within|from) (?:\S+\s+){0,5}\S+?)[.?!]?$")
_VALUES = {"red": "teal", "blue": "orange", "green": "purple", "black": "grey", "white": "beige", "bold": "italic",
           "italic": "bold", "dark": "light", "light": "dark", "ascending": "descending", "descending": "ascending",
           "landscape": "portrait", "horizontal": "vertical", "vertical": "horizontal"}
_NUMBER_WORDS = {"one": "two", "two": "three", "three": "four", "first": "second", "second": "third",
                 "double": "single", "single": "double", "half": "quarter"}


def reword(text: str, i: int) -> str:
    """Politeness dropped or added, the sentences or a trailing phrase moved, punctuation and
    quotes changed, and the case changed: the meaning kept."""
    s = _TAIL.sub("", _POLITE_HEAD.sub("", text.strip())).strip()
    s = s[:1].upper() + s[1:]
    sentences = re.split(r"(?<=[.?!])\s+", s)
    if len(sentences) > 1:
        s = " ".join(sentences[1:] + sentences[:1])  # the request first, the context after (or the other way)
    else:
        m = _TRAILING_PHRASE.match(s)
        if m and len(m.group("head").split()) >= 3:
            s = f"{m.group('tail')[:1].upper()}{m.group('tail')[1:]}, {m.group('head')[:1].lower()}{m.group('head')[1:]}"
    s = re.sub(r"[?!;]", "", s)
    s = s.replace('"', "'") if i % 2 else s
    s = (s.lower(), s.upper(), s)[i % 3]
    return ("Please ", "Hey, could you ", "")[i % 3] + s + (" Thanks!", "", " Thank you.")[i % 3]


OPENERS = ("Quick question: ", "Go ahead and ", "Make sure to ", "Real quick, ", "I was wondering, ", "Hi team, ",
           "Urgent: ", "When you can, ", "No rush, but ")
CLOSERS = (" Much appreciated!", " Cheers mate.", " That would be great.", " Thanks a bunch!", " You're the best.",
           " Let me know when it's done.")


def with_small_talk(text: str, i: int) -> str:
    """The request wrapped in an opener and a closer of small talk."""
    return OPENERS[i % len(OPENERS)] + text[:1].lower() + text[1:] + CLOSERS[i % len(CLOSERS)]


def change_parameter(text: str, i: int) -> tuple[str, str] | None:
    """(the task with one parameter changed, which kind), or None when it has no parameter
    or the parameter is most of the task (fewer than three content words around it: "set
    'Dim screen when inactive' to off" with another setting is another task)."""
    found = _change(text, i)
    if found is None:
        return None
    changed, kind, start, end = found
    return (changed, kind) if len(read(text[:start] + text[end:]).plain) >= 3 else None


def _change(text: str, i: int) -> tuple[str, str, int, int] | None:
    m = re.search(r"(?<![\w.])(\d+(?:\.\d+)?)(?![\w.])", text)
    if m:
        n = m.group(1)
        new = str(float(n) + 1.5) if "." in n else str(int(n) + 3)
        return text[:m.start(1)] + new + text[m.end(1):], "num", m.start(1), m.end(1)
    m = re.search(r'(?<!\w)"([^"\n]{2,60})"(?!\w)', text) or re.search(r"(?<!\w)'([^'\n]{2,60})'(?!\w)", text)
    if m and not re.search(r"[./]", m.group(1)):
        return text[:m.start(1)] + NEW_NAMES[i % len(NEW_NAMES)] + text[m.end(1):], "quote", m.start(1), m.end(1)
    m = re.search(r"(?<![\w/.-])([A-Za-z][\w-]*)\.(png|jpg|jpeg|docx|xlsx|pptx|txt|pdf|csv|py|mp3|mp4|odt|ods)\b", text)
    if m:
        return text[:m.start(1)] + "summary_v2" + text[m.end(1):], "file", m.start(1), m.end(1)
    m = re.search(r"\b(" + "|".join(_NUMBER_WORDS) + r")\b", text)
    if m:
        return text[:m.start(1)] + _NUMBER_WORDS[m.group(1)] + text[m.end(1):], "number word", m.start(1), m.end(1)
    m = re.search(r"\b(" + "|".join(_VALUES) + r")\b", text)
    if m:
        return text[:m.start(1)] + _VALUES[m.group(1)] + text[m.end(1):], "value", m.start(1), m.end(1)
    for m in re.finditer(r"(?<=[a-z,] )([A-Z][a-z]{2,})\b", text):
        said = content_words(text.casefold())
        if m.group(1) not in _APPS and said.count(stem(m.group(1).casefold())) == 1:  # a name said once
            return text[:m.start(1)] + NEW_NAMES[i % len(NEW_NAMES)] + text[m.end(1):], "name", m.start(1), m.end(1)
    return None
