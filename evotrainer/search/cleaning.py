"""Cleaning of mutator output before it becomes a genome section, and the word and sentence helpers of prompt text.

Small instruction-tuned models wrap the text they were asked for in chatter: a "Sure! Here is the
rewritten section:" preamble, a label ("Rewrite:", "New prompt:"), code fences, quotes, role markers,
and a closing "I hope this helps". :func:`clean_mutator_text` peels those layers off and rejects what
is left when it cannot be an instruction (too short, too long, an echo of the mutation request, a bare
question). Model output is untrusted text: it is only ever pattern-matched here, never executed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = [
    "ECHO_MARKERS", "bullet_prefix", "clean_mutator_text", "content_words", "join_sentences", "normalize_sentence",
    "on_topic_fraction", "split_sentences", "word_count",
]

ECHO_MARKERS: tuple[str, ...] = (
    "output only the",
    "nothing else",
    "rewrite the text",
    "rewrite the following",
    "combine a and b",
    "text a:",
    "text b:",
    "version a:",
    "version b:",
    "current instruction",
    "mutation instruction",
)
"""Phrases of the mutation requests themselves (see ``mutation_prompts``): output containing one of them
echoed the request instead of answering it. Lower case."""

_ROLE_MARKER = re.compile(
    r"<\|(?:im_start|im_end|endoftext|eot_id|start_header_id|end_header_id)\|>|</?s>", re.IGNORECASE
)
_REASONING = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", re.DOTALL | re.IGNORECASE)
_OPEN_REASONING = re.compile(r"<(?:think|thinking|reasoning)>", re.IGNORECASE)
_CLOSE_ONLY = re.compile(r"^.*?</(?:think|thinking|reasoning)>", re.DOTALL | re.IGNORECASE)  # opened by the template
_ROLE_LINE = re.compile(r"^\s*(?:assistant|system|user)\s*:?\s*$", re.IGNORECASE)
_ROLE_PREFIX = re.compile(r"^\s*(?:assistant|ai)\s*:\s*", re.IGNORECASE)
_FENCE_BLOCK = re.compile(r"```[^\n`]*\n?(.*?)(?:```|$)", re.DOTALL)
_NOUNS = (
    r"(?:text|section|instruction|instructions|prompt|version|rule|rules|role|format|output|answer|"
    r"result|response|persona|description|specification|spec)"
)
_LABEL = re.compile(
    r"^\s*[*_#>\s]*(?:"
    r"(?:here\s+is|here's|below\s+is|this\s+is)\s+(?:the\s+|a\s+|an\s+|my\s+|your\s+)?[^:\n]{0,60}?"
    + _NOUNS
    + r"[^:\n]{0,30}"
    r"|(?:the\s+)?(?:new|improved|revised|rewritten|updated|edited|modified|combined|merged|final|better|"
    r"simplified|shorter|stricter|concise)\s*[^:\n]{0,25}?" + _NOUNS + r"?"
    r"|rewrite|rewritten|revision|" + _NOUNS + r"|(?:section|text)\s+[a-z0-9]{1,12}"
    r"|(?:the\s+)?(?:rewritten|revised|new|combined|merged|improved)\s+" + _NOUNS + r"\s+(?:is|would be|reads)"
    r"|(?:the\s+)?context"
    r")\s*[*_]*\s*(?::|-{1,2}|–|—)\s*[*_]*",
    re.IGNORECASE,
)
_PREAMBLE = re.compile(
    r"^\s*(?:sure|certainly|of course|okay|ok|absolutely|great|alright|no problem|here you go|"
    r"happy to help)\b[^.!:\n]*[.!:]?\s*",
    re.IGNORECASE,
)
_CHATTER = re.compile(
    r"(?:^|(?<=[.!?\n])\s*)(?:"
    r"i hope|hope this|let me know|feel free|this version|this rewrite|this revised|this new|"
    r"this updated|this combined|this merged|in this version|the (?:new|revised|rewritten) (?:text|version)|"
    r"the changes|changes made|(?:\*\*)?note\s*:|(?:\*\*)?explanation\s*:|i have |i've |i made|i added|"
    r"i removed|i changed|i kept|i combined|if you (?:need|want|have)|do you want|would you like|"
    r"this is a (?:rewritten|revised|new|shorter|stricter)|the (?:original|rewritten|revised) (?:text|version)|"
    r"original text|your rewritten|please specify|please let me"
    r")",
    re.IGNORECASE,
)
_META_LEAD = re.compile(
    # a leading clause about the rewriting itself, up to its colon:
    # "The text will now be rewritten: ...", "Replace the rules with the rewritten version: ..."
    r"^\s*[^:\n]{0,80}?\b(?:rewrit\w*|revis\w*|will now|updated version|new version)\b[^:\n]{0,40}:\s*",
    re.IGNORECASE,
)
_QUOTE_PAIRS = {'"': '"', "'": "'", "“": "”", "‘": "’", "«": "»", "`": "`", "„": "“"}


def word_count(text: str) -> int:
    """Number of whitespace-separated words in ``text``."""
    return len(text.split())


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")


def split_sentences(text: str) -> list[str]:
    """Split a section into rule sentences: one per line, and lines further at sentence ends.

    Bullet markers stay on their sentence. Empty pieces are dropped.
    """
    out: list[str] = []
    for line in text.splitlines():
        out.extend(piece.strip() for piece in _SENTENCE_END.split(line.strip()) if piece.strip())
    return out


def join_sentences(sentences: Sequence[str], like: str) -> str:
    """Join rule sentences the way ``like`` was laid out (one per line if it had line breaks)."""
    return ("\n" if "\n" in like.strip() else " ").join(sentences)


def normalize_sentence(text: str) -> str:
    """Comparison key of a sentence: bullet marker dropped, lower case, whitespace collapsed."""
    return " ".join(_BULLET.sub("", text).lower().split())



def bullet_prefix(sentence: str) -> str:
    """The bullet marker a sentence starts with ("- ", "1. ", ...), or "" when it has none."""
    match = _BULLET.match(sentence)
    return match.group(0) if match else ""


_STOPWORD_TEXT = (
    "the and for are but not you your yours with this that these those from into onto than then them they "
    "their there here what when where which who whom how why all any can could would should will shall may "
    "might must has have had was were been being its it's our ours out about over under also just only very "
    "such some each every one two more most less few own same other both too per via his her she him"
)
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def content_words(text: str) -> set[str]:
    """Lower-cased words of >= 3 letters, stop words removed, a plural 's' trimmed (crude stemming)."""
    words = re.findall(r"[a-z]+", text.lower())
    return {w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w
            for w in words if len(w) >= 3 and w not in _STOPWORDS}


def on_topic_fraction(old: str, new: str, vocabulary: frozenset[str] | set[str] = frozenset()) -> float:
    """Share of ``new``'s content words found in ``old``'s or in ``vocabulary``, in [0, 1].

    A cheap lexical guard against off-topic rewrites (a small mutator asked to tighten a rule
    sometimes writes about wedding cakes); 1.0 when ``new`` has no content words.
    """
    new_words = content_words(new)
    if not new_words:
        return 1.0
    known = content_words(old) | set(vocabulary)
    return len(new_words & known) / len(new_words)


_MARKER_BLOCK = re.compile(r"^\s*(<<<|---+)[ \t]*\n(.*?)(?:\n[ \t]*(?:>>>|---+)(?:\n.*)?)?$", re.DOTALL)


def _strip_markers(text: str) -> str:
    """The text inside a leading ``<<<`` ... ``>>>`` or ``---`` ... ``---`` block (the markers the chats put
    around an instruction and a shown output), anything after the closing marker dropped; other text
    unchanged."""
    m = _MARKER_BLOCK.match(text)
    out = m.group(2).strip() if m else text
    return _STRAY_MARKERS.sub("", out).strip()


_STRAY_MARKERS = re.compile(r"^(?:\s*(?:<<<|>>>|---+)[ \t]*(?:\n|$))+|(?:(?:^|\n)[ \t]*(?:<<<|>>>|---+)\s*)+$|^\s*(?:<<<|>>>)[ \t]*")


def _strip_fences(text: str) -> str:
    """Content of the first non-empty fenced block when there is one; else the text without fences."""
    if "```" not in text:
        return text
    for match in _FENCE_BLOCK.finditer(text):
        inner = match.group(1).strip()
        if inner:
            return inner
    return text.replace("```", " ")


def _strip_quotes(text: str) -> str:
    """Remove surrounding quotes that pair with each other (repeatedly, e.g. ``"'text'"``), and a
    lone quote left at either end after cutting."""
    while len(text) >= 2 and text[0] in _QUOTE_PAIRS and text[-1] == _QUOTE_PAIRS[text[0]]:
        inner = text[1:-1]
        if text[0] in inner or text[-1] in inner:
            break  # '"a" and "b"': the outer quotes belong to different pairs
        text = inner.strip()
    for quote in ('"', "“", "”"):
        if text.count(quote) == 1 and (text.startswith(quote) or text.endswith(quote)):
            text = text.replace(quote, "").strip()
    return text


def _strip_leading(text: str) -> str:
    """Remove preambles ("Sure! ...") and labels ("New prompt:") at the start, repeatedly."""
    for _ in range(4):
        before = text
        text = _ROLE_PREFIX.sub("", text, count=1)
        match = _PREAMBLE.match(text)
        if match:
            rest = text[match.end():]
            # "Sure, here is the new rule: ..." -> drop through the colon; "Okay." alone -> drop it.
            text = rest
        text = _LABEL.sub("", text, count=1).lstrip()
        text = _META_LEAD.sub("", text, count=1).lstrip()
        text = _strip_quotes(text.strip())
        if text == before:
            break
    return text


_DANGLING_INTRO = re.compile(r"(?:^|(?<=[.!?\n]))[^.!?\n]*:\s*$")


def _strip_trailing(text: str) -> str:
    """Cut the text at the first closing remark ("I hope this helps", "This version ...") and drop a
    final sentence that only introduces something that never came ("Here's an example:")."""
    match = _CHATTER.search(text)
    if match and match.start() > 0:
        text = text[: match.start()]
    elif match:
        return ""
    return _DANGLING_INTRO.sub("", text.rstrip()).rstrip()


def _collapse_whitespace(text: str) -> str:
    """Collapse runs of spaces per line, drop blank lines; single line breaks (lists) are kept."""
    lines = [" ".join(line.split()) for line in text.splitlines()]
    return "\n".join(line for line in lines if line)


def clean_mutator_text(
    text: object,
    *,
    min_words: int = 3,
    max_words: int = 160,
    echo_of: Sequence[str] = (),
) -> str | None:
    """Extract the instruction a mutator model returned, or None when nothing valid remains.

    Peels, in order: reasoning blocks (``<think>`` ... ``</think>``; an unclosed one rejects the text), role
    markers and role lines, code fences (the first non-empty fenced block wins),
    "Sure! ..." preambles and labels such as "Rewrite:", "New prompt:", "Improved instruction:",
    "Here is the rewritten section:", a ``<<<`` ... ``>>>`` or ``---`` ... ``---`` block (its inside kept), surrounding quotes, trailing chatter ("I hope this helps",
    "Let me know ...", "This version ...", "Note: ..."); then collapses whitespace (single line breaks
    are kept, since format specs are often lists).

    Args:
        text: raw model output (anything that is not a ``str`` is rejected).
        min_words: fewer remaining words than this rejects the text (default 3).
        max_words: more remaining words than this rejects the text (a run-on or a copied task input).
        echo_of: extra strings (e.g. the mutation instruction sent) whose verbatim, case-insensitive
            presence means the model echoed its request; :data:`ECHO_MARKERS` always apply.

    Returns:
        The cleaned text, or None when it is empty, shorter than ``min_words``, longer than
        ``max_words``, an echo of the request, or only questions (not an instruction).
    """
    if not isinstance(text, str):
        return None
    out = _CLOSE_ONLY.sub("", _REASONING.sub("\n", text))  # a reasoning model's thoughts are not its answer
    if _OPEN_REASONING.search(out):  # reasoning that never closed: the answer never came
        return None
    out = _ROLE_MARKER.sub("\n", out)
    out = "\n".join(line for line in out.splitlines() if not _ROLE_LINE.match(line))
    out = _strip_fences(out.strip())
    out = _strip_leading(out.strip())
    out = _strip_markers(out)
    out = _strip_trailing(out)
    out = _strip_quotes(_collapse_whitespace(out))
    out = _strip_leading(out)
    if not out:
        return None
    lowered = out.lower()
    if any(marker in lowered for marker in ECHO_MARKERS):
        return None
    if any(echo.strip() and echo.strip().lower() in lowered for echo in echo_of):
        return None
    sentences = [s for s in re.split(r"(?<=[.!?])\s+|\n", out) if s.strip()]
    if sentences and all(s.rstrip().endswith("?") for s in sentences):
        return None
    n_words = word_count(out)
    if n_words < min_words or n_words > max_words:
        return None
    return out
