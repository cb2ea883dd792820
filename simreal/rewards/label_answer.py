"""The label a stage-2 answer states: RL-VLM-F's 0 / 1 / -1, in a line or in prose.

The labelling prompt asks for one line: 0 if the goal is better achieved in Image 1, 1 if in
Image 2, -1 if unsure. Real VLMs often answer in prose ("After comparing both images, my answer
is 1", "Image 2 is better."), so :func:`stated_label` reads an explicit final choice, and refuses
(None) anything it would have to guess at. Image N is label N - 1.

    >>> stated_label("1. Image 1 shows the gripper open.\\n2. Image 2 shows the cube on the target.\\nFinal answer: 1")
    1
    >>> stated_label("Image 2 is better.")
    1
    >>> stated_label("Image 1 is better. Answer: 1") is None  # the label contradicts the prose
    True
"""

from __future__ import annotations

import bisect
import json
import re

FIRST, SECOND, UNSURE = 0, 1, -1

_LABEL = r"(?P<label>-1|0|1)(?![.,]?\w)(?!\s*(?:or|/)\s*-?\d)(?!\s+(?:if|when|unless)\b)"  # not 10, 1.5, 0 or 1, 1 if
_IMAGE = r"(?:image\s*(?:#\s*)?(?P<image>[12])(?!\d)|(?P<ordinal>first|second)\s+image)"
_ADVERB = r"(?:(?:slightly|clearly|much|far|definitely|significantly|somewhat|noticeably|a bit|a little)\s+)?"
_CLOSER = r"closer\s+to\s+(?:achieving\s+|reaching\s+|completing\s+)?the\s+(?:goal|target)"
_BETTER = rf"(?:the\s+)?(?:better|preferred|preferable|superior|{_CLOSER})"
_MARKS = r"[\s*_`'\"]*"  # markdown and quotes around a name
_IS = rf"(?:is|looks|seems|appears)\b{_MARKS}"

#: "<keyword> [is] [:] <label or image>" (no image after "label": "I'd label Image 1 as worse").
_EXPLICIT = re.compile(
    rf"\b(?:final\s+)?(?P<keyword>answer|choice|preference|label)\b"
    rf"(?:\s*(?:is|would\s+be|will\s+be)\b)?{_MARKS}(?:[:=]{_MARKS})?(?:{_LABEL}|{_IMAGE})",
    re.IGNORECASE,
)
#: A whole line that is only a label or an image's name; _LEAD: or one that starts with it, then a dash or a bracket.
_BARE = re.compile(rf"^[\s\W]*?(?:{_LABEL}|{_IMAGE})[\s.!*`\"']*$", re.IGNORECASE)
_LEAD = re.compile(rf"^[\s\W]*?(?:{_LABEL}|{_IMAGE})[\s*`\"']*(?:$|[-–—(])", re.IGNORECASE)
#: Prose naming the better image (group ``worse``: naming the worse one).
_PROSE = [
    re.compile(p, re.IGNORECASE)
    for p in (
        rf"{_IMAGE}{_MARKS}{_IS}{_ADVERB}{_BETTER}\b",
        rf"{_IMAGE}{_MARKS}{_IS}{_ADVERB}(?P<worse>worse|further\s+from\s+the\s+(?:goal|target))\b",
        rf"{_IMAGE}{_MARKS}(?:better|more\s+closely|more\s+fully)\s+(?:achieves|accomplishes|fulfils|fulfills|meets)\b",
        rf"\b(?:better|more\s+fully|more\s+closely)\s+achieved\s+in\s+{_IMAGE}",
        rf"\bachieved\s+better\s+in\s+{_IMAGE}",
        rf"\bI\s+(?:would\s+|'d\s+)?(?:prefer|choose|pick|select)\s+{_IMAGE}",
    )
]
#: A negation or hedge in the clause before a statement voids it ("I cannot say Image 2 is better").
_HEDGE = re.compile(
    r"\b(?:not|no|never|neither|nor|cannot|if|whether|unless|unclear|unsure|uncertain|hard|"
    r"difficult|impossible|maybe|perhaps|doubt)\b|n't\b",
    re.IGNORECASE,
)
_CLAUSE_END = re.compile(r"[.!?;,:\n]|\bbut\b", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.!?\n]")
_KEYS = ("answer", "label", "preference", "choice")


def stated_label(text: str) -> int | None:
    """The label (0, 1 or -1) a stage-2 answer states, or None when it states none.

    Grammar, case-insensitive; "Image N" (also "Image #N", "the first/second image") stands
    for label N - 1 wherever a label may stand, except after ``label``:

    1. explicit, the first of these found:
       a. JSON: an object with an ``answer``, ``label``, ``preference`` or ``choice`` key whose
          value is -1, 0 or 1 (number or string) or an image: ``{"answer": 1}``;
       b. the last ``[final] answer|choice|preference|label [is|would be] [:|=] VALUE``,
          markdown and quotes allowed around the parts: ``**Answer: 0**``, ``my answer is 1``;
       c. a last non-empty line that is only a value, or a first one that starts with a value
          and then ends or goes on after a dash or a bracket (both: the same value): ``1``,
          ``**0**.``, ``Image 2``, ``0 - Image 1 is closer``, ``0`` then a line of explanation;
    2. prose naming an image: ``Image N is [clearly, slightly, ...] [the] better | preferred |
       closer to the goal``, ``Image N is worse`` (the other one), ``Image N better achieves``,
       ``the goal is better achieved in Image N``, ``I prefer | choose | pick Image N``.

    A VALUE must stand alone (not ``10``, ``1.5``, ``0 or 1``, ``1 if ...``). A statement of 1b
    or 2 is void inside a question, or when the clause before it (since the last ``.,;:!?``, line
    break or "but") holds a negation or hedge (not, no, neither, nor, cannot, if, whether,
    unclear, hard, maybe, ...). Then: an explicit label counts unless it is 0 or 1 and the prose
    names only the other image (the label and the image's number confused: "Image 1 is better.
    Answer: 1"); without one, prose counts when it names one image only. Anything else is None:
    no statement, both images named better, "I cannot tell". A guessed label is worse than none.
    """
    clause_ends = [m.end() for m in _CLAUSE_END.finditer(text)]
    sentence_ends = [m.start() for m in _SENTENCE_END.finditer(text)]

    def void(match: re.Match[str]) -> bool:  # hedged, or asked (searched by bisection: linear in the text)
        k = bisect.bisect_right(clause_ends, match.start())
        if _HEDGE.search(text, clause_ends[k - 1] if k else 0, match.start()):
            return True
        k = bisect.bisect_left(sentence_ends, match.end())
        return k < len(sentence_ends) and text[sentence_ends[k]] == "?"

    explicit = _json_label(text)
    if explicit is None:
        found = [
            m
            for m in _EXPLICIT.finditer(text)
            if not void(m) and not (m["keyword"].lower() == "label" and m["label"] is None)
        ]
        lines = [ln for ln in text.splitlines() if ln.strip()]
        bare = {_value(m) for m in (_LEAD.match(lines[0]), _BARE.match(lines[-1])) if m} if lines else set()
        if not found and len(bare) > 1:  # the first line says one label, the last the other
            return None
        explicit = _value(found[-1]) if found else bare.pop() if bare else None
    named = {_value(m) for pattern in _PROSE for m in pattern.finditer(text) if not void(m)}
    if explicit is not None:
        return None if explicit != UNSURE and named == {1 - explicit} else explicit
    return named.pop() if len(named) == 1 else None


def parse_label(text: str) -> int:
    """:func:`stated_label`, with :data:`UNSURE` when the answer states none."""
    label = stated_label(text)
    return UNSURE if label is None else label


def _value(match: re.Match[str]) -> int:
    """The label a match of the patterns above names: its label, or its image's (N - 1, the other if worse)."""
    groups = match.groupdict()
    if groups.get("label") is not None:
        return int(groups["label"])
    image = FIRST if groups["image"] == "1" or (groups["ordinal"] or "").lower() == "first" else SECOND
    return 1 - image if groups.get("worse") else image


def _json_label(text: str) -> int | None:
    """The label of a JSON object in ``text`` (grammar 1a), or None."""
    match = re.search(r"\{.*\}", text, re.DOTALL)
    try:
        obj = json.loads(match.group(0)) if match else None
    except (json.JSONDecodeError, RecursionError):  # not JSON, or nested past Python's recursion limit
        return None
    if not isinstance(obj, dict):
        return None
    for key in _KEYS:
        value = obj.get(key)
        if isinstance(value, (int, str)) and not isinstance(value, bool):
            bare = _BARE.match(str(value))
            if bare:
                return _value(bare)
    return None
