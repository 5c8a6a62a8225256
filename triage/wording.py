"""One reading of an instruction for the benchmark-overlap check and task families: its
content words (case, punctuation, politeness and stop words gone, light stemming) and its
parameters as typed slots (numbers, quoted names, file names, paths, URLs, e-mail
addresses, cell references), so that rewordings read alike and parameter variants share a
template."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

# Bump when the reading changes: the shipped benchmark index records the version it was
# derived with (tests compare it with this code's reading).
WORDING_VERSION = 4

SLOT_KINDS = ("url", "email", "path", "file", "quote", "cell", "num", "value")

_URL = r"(?:https?|ftp)://[^\s\"'<>()\[\]{}]+|www\.[A-Za-z0-9-]+\.[^\s\"'<>()\[\]{}]+"
_EMAIL = r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"
_PATH = r"(?<![\w/.~])(?:~|\.\.?)?/(?:[\w.@%+-]+/)*[\w.@%+-]*"
_FILE = r"(?<![\w/.-])[\w-]+(?:\.[\w-]+)*\.[A-Za-z][A-Za-z0-9]{0,4}\b"
_QUOTE = r"\"([^\"\n]{1,120})\"|“([^”\n]{1,120})”|‘([^’\n]{1,120})’|(?<!\w)'([^'\n]{1,120}?)'(?!\w)|`([^`\n]{1,120})`"
_CELL = r"\b[A-Z]{1,3}[1-9][0-9]{0,5}(?::[A-Z]{1,3}[1-9][0-9]{0,5})?\b"
# Numbers with their unit or suffix (20cm, 40pt, 1.5, $25, 3rd, 50%) and spelled-out
# numbers, so "double line spacing" and "1.5 line spacing" read as one template.
_NUMBER_WORDS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred thousand million "
    "first second third fourth fifth sixth seventh eighth ninth tenth half quarter single double triple twice "
    "thrice dozen"
).split()
NUMBER_WORDS = frozenset(_NUMBER_WORDS)
# Words that are a setting's value (a colour, a side, a style, an order): parameters written
# without quotes, so "... background to red" and "... to teal" share a template.
VALUE_WORDS = frozenset("""
red green blue yellow black white grey gray purple violet orange pink brown cyan magenta teal navy maroon olive
beige gold silver lime indigo turquoise
left center centre top bottom middle upper lower
bold italic underlined strikethrough regular
dark light ascending descending landscape portrait horizontal vertical horizontally vertically
""".split())
_NUM = r"(?<![\w.])[$€£¥]?\d+(?:[.,:/]\d+)*(?:%|[A-Za-z]{1,4}\b)?(?!\w)"  # not inside a word: "H2O", "v2"
# (kind, pattern, a character every match holds): a text without the character skips the kind.
_KINDS = (("url", _URL, "/"), ("email", _EMAIL, "@"), ("quote", _QUOTE, "\"'`“‘"), ("path", _PATH, "/"),
          ("file", _FILE, "."), ("cell", _CELL, "0123456789"), ("num", _NUM, "0123456789"))
_WHOLE = {k: re.compile(f"(?:{p}|(?:{'|'.join(_NUMBER_WORDS)}))$" if k == "num" else f"(?:{p})$", re.IGNORECASE)
          for k, p, _ in _KINDS if k not in ("quote", "cell")}
_slot_patterns: dict[tuple[str, ...], re.Pattern[str] | None] = {}


def _slot_pattern(text: str) -> re.Pattern[str] | None:
    """The slot regex over the kinds `text` can hold (most instructions hold few: one
    alternation of all seven costs several times more per character)."""
    kinds = tuple(k for k, _, chars in _KINDS if any(c in text for c in chars))
    try:
        return _slot_patterns[kinds]
    except KeyError:
        pat = _slot_patterns[kinds] = re.compile(
            "|".join(f"(?P<{k}>{p})" for k, p, _ in _KINDS if k in kinds), re.IGNORECASE) if kinds else None
        return pat
_CELL_CASED = re.compile(_CELL)  # cell references only in capitals: "a1" is a word
_NOT_CELLS = frozenset({"MP3", "MP4", "M4A", "H264", "H265", "X264", "PS4", "PS5", "W3C", "ES6", "UTF8", "IPV4", "IPV6"})
_WORD = re.compile(r"[a-z0-9]+")
# Politeness said in phrases whose words are content words elsewhere ("advance", "favor", "chance").
_POLITE = re.compile(r"\b(?:thanks?(?: you)?(?: so much| very much| a lot)? in advance|do me (?:a|the) favou?r(?: and| of)?"
                     r"|if (?:it is |it's )?(?:at all )?possible|if you (?:do not|don't) mind"
                     r"|when(?:ever)? you (?:get|have) (?:a|the) (?:chance|moment|minute|second|sec)"
                     r"|at your (?:earliest )?convenience|as soon as possible|asap|let me know(?: when(?: (?:it is|it's|you are|you're) done)?)?"
                     r"|you(?: are|'re) the best|go ahead and|make sure(?: that| to)?)\b", re.IGNORECASE)
_POSSESSIVE = re.compile(r"(\w)['’]s\b")
_NOT = re.compile(r"n['’]t\b")

# Words that carry no task: articles, pronouns, auxiliaries, prepositions, and the
# politeness and filler of requests ("could you please help me", "thanks!").
STOP_WORDS = frozenset("""
a an the this that these those there here it its it's itself i me my mine myself we us our ours you your yours
yourself he him his she her they them their theirs one's
is are was were be been being am do does did doing done have has had having will would shall should can could
may might must ca wo
and or but nor so then than too very also just only as if else while because since though although
of in on at to into onto from by with without within for about above below over under up down out off
through across after before during between among again once further via per upon
what which who whom whose when where why how whatever whenever
some any each every all both either neither few more most other such same own much many lot lots bit
please kindly pls plz thanks thank thx cheers hey hi hello dear ok okay oh well sure yes yeah
help helping assist assistance want wanted wish need needs needed like love would'd mind possible possibly
let lets let's able try trying appreciate appreciated grateful greatly really actually simply quickly maybe
something anything everything somehow now currently right just kind sort
rush hurry urgent urgently quick question wondering wonder hope hoping sorry bother trouble excuse
awesome amazing great wonderful perfect mate buddy pal bunch advance favor favour
""".split())


def stem(word: str) -> str:
    """A light suffix stripper: plurals, -ing, -ed, -ly and a final e, so "locked",
    "locks" and "lock" (or "saving", "saved", "save") read as one word."""
    n = len(word)
    if n > 4 and word.endswith("ies"):
        word = word[:-3] + "y"
    elif n > 5 and word.endswith("ing"):
        word = word[:-3]
    elif n > 4 and word.endswith("ed"):
        word = word[:-2]
    elif n > 4 and word.endswith("ly"):
        word = word[:-2]
    elif n > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    if len(word) > 3 and word.endswith("e"):
        word = word[:-1]
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "aeiouls":
        word = word[:-1]  # "stopped" -> "stopp" -> "stop"
    return word


_stem_memo: dict[str, str | None] = {}


def content_words(text: str) -> list[str]:
    """The stemmed content words of lower-cased `text`, in order (stop words and
    single letters dropped; a spelled-out number stays itself)."""
    out = []
    memo = _stem_memo
    for w in _WORD.findall(text):
        s = memo.get(w, "")
        if s == "":
            s = memo[w] = None if (w in STOP_WORDS or len(w) < 2) else w if w in NUMBER_WORDS else stem(w)
        if s is not None:
            out.append(s)
    return out


def _template_words(text: str, words: list[str], slots: list[Slot]) -> None:
    """Content words of lower-cased `text` onto `words`, spelled-out numbers as num slots and
    value words as value slots."""
    memo = _stem_memo
    for w in _WORD.findall(text):
        if w in NUMBER_WORDS or w in VALUE_WORDS:
            kind = "num" if w in NUMBER_WORDS else "value"
            words.append(f"<{kind}>")
            slots.append(Slot(kind, w))
            continue
        s = memo.get(w, "")
        if s == "":
            s = memo[w] = None if (w in STOP_WORDS or len(w) < 2) else stem(w)
        if s is not None:
            words.append(s)


@dataclass(frozen=True)
class Slot:
    kind: str  # one of SLOT_KINDS
    value: str  # as written (quotes stripped), case folded


@dataclass(frozen=True)
class Wording:
    """`words`: content words in order, each slot as `<kind>`; `plain`: content words of the
    whole text, slot values read as words too (a reworded copy that drops the quotes
    around a name still reads as the original); `slots`: the parameters in order."""

    words: tuple[str, ...]
    plain: frozenset[str]
    slots: tuple[Slot, ...]
    names: frozenset[str] = frozenset()  # content words written as names (see `_names`): parameters too
    text: str = ""  # the instruction as read (normalize)

    def as_written(self, word: str) -> str:
        """The first word of the text that reads as content word `word` (for messages)."""
        for w in _WORD.findall(self.text.casefold()):
            if _stem_memo.get(w) == word:
                return str(w)
        return word

    @property
    def template(self) -> str:
        return " ".join(self.words)


def _slot_kind(kind: str, inner: str) -> str:
    """A quoted parameter that is wholly a file name, path, number, ... is that kind, so
    quoting it or not reads the same."""
    if kind != "quote":
        return kind
    for k, rx in _WHOLE.items():
        if rx.match(inner):
            return k
    return kind


def normalize(text: str) -> str:
    """NFKC, whitespace collapsed: the instruction as the shipped index stores it."""
    return " ".join(unicodedata.normalize("NFKC", text).split())


def read(text: str, *, names: bool = False) -> Wording:
    """The reading of one instruction (see the module doc); `names`: also find the words
    written as names (the benchmark side of a match needs them)."""
    text = normalize(text)
    if "'" in text or "’" in text:
        text = _NOT.sub(" not", _POSSESSIVE.sub(r"\1", text))
    text = _POLITE.sub(" ", text)
    words: list[str] = []
    slots: list[Slot] = []
    pos = 0
    pattern = _slot_pattern(text)
    for m in (pattern.finditer(text) if pattern is not None else ()):
        kind = m.lastgroup or "num"
        raw = m.group(0)
        if kind == "cell" and (not _CELL_CASED.fullmatch(raw) or raw in _NOT_CELLS):
            continue  # lower-case "a1": a word, left to content_words
        if kind == "quote":
            inner = raw[1:-1]  # every quote form has one-character delimiters
            if not content_words(inner.casefold()) and not re.search(r"\d", inner):
                continue  # a quoted stop word or punctuation: nothing to compare
            kind = _slot_kind(kind, inner.strip())
            raw = inner
        _template_words(text[pos:m.start()].casefold(), words, slots)
        words.append(f"<{kind}>")
        slots.append(Slot(kind, raw.strip().casefold().rstrip(".")))
        pos = m.end()
    _template_words(text[pos:].casefold(), words, slots)
    # The plain words: the template's, and the slot values read as words.
    plain = {w for w in words if w[0] != "<"}
    for sl in slots:
        plain.update(content_words(sl.value))
    frozen = frozenset(plain)
    return Wording(tuple(words), frozen, tuple(slots), _names(text, frozen) if names else frozenset(), text)


_NAME = re.compile(r"(?<![.?!:]\s)(?<!^)\b([a-z0-9]*[A-Z][A-Za-z0-9]*)")


def _names(text: str, plain: frozenset[str]) -> frozenset[str]:
    """Content words capitalised inside a sentence ("install the extension Python",
    "my name is Anonym"): a name the task may have changed without quoting it."""
    out = set()
    for m in _NAME.finditer(text):
        for w in content_words(m.group(1).casefold()):
            if w in plain:
                out.add(w)
    return frozenset(out)

