"""The answer of a completion: its reasoning removed, for every model family (pure).

Reasoning never counts as the answer: a diff drafted there is never the patch, even when
the answer has none, and a forbidden path written there never reaches the integrity
check. What is reasoning, by family (the names are vLLM's ``--reasoning-parser`` names,
:data:`REASONING_PARSERS`; ``auto``, the default, reads every syntax):

* **tags** (:data:`TAGS`): ``<think>...</think>`` (DeepSeek R1, Qwen3, GLM-4.5, MiniMax,
  Hunyuan, ERNIE, ...), ``<thinking>``, ``<seed:think>`` (Seed-OSS), ``◁think▷`` (Kimi),
  ``[THINK]...[/THINK]`` (Magistral), ``<|START_THINKING|>...<|END_THINKING|>`` (Cohere
  Command A). A block is dropped from its opening tag to the closing tag of the same
  syntax; everything before a closing tag that was never opened (the chat template opened
  it in the prompt), and everything after an opening tag never closed (the completion ran
  out while reasoning) unless a tool call follows it (the call ends the reasoning, as
  Kimi K2's and Qwen3.5's parsers read it). A tag inside a diff content line (a line
  starting with ``+``,
  ``-`` or a space, with text before and after the tag: ``+END = "</think>"``) is code,
  not a tag.
* **granite**: a completion that starts with ``Here is my thought process:`` is reasoning
  up to ``Here is my response:`` (all of it when that never comes).
* **harmony** (gpt-oss, ``openai_gptoss``): the text is a sequence of messages, each with a
  header ``[<|start|>ROLE]<|channel|>CHANNEL [to=RECIPIENT] [<|constrain|>TYPE]<|message|>``
  and a body ending at ``<|end|>``, ``<|return|>``, ``<|call|>`` or the next header. Only
  ``final`` messages and ``commentary`` messages without a recipient (preambles) are
  answer text; a message to ``functions.NAME`` (on any channel) is a tool call (its body
  the arguments); ``analysis`` is reasoning, and so is text before the first header.
  Decoded without its special tokens (``skip_special_tokens``), a harmony completion reads
  ``analysisWe need...assistant to=functions.NAMEcommentary json{...}assistantfinal...``:
  the same messages, their headers the words the tokens leave (``assistant``, an optional
  ``to=RECIPIENT``, the channel, an optional ``json``), split and kept by the same rule.
  A text that only starts with a channel word (``analysis: the bug...``) is read so only
  when another header follows, the word is glued to the text after it
  (``analysisWe``), or the parser is ``openai_gptoss``.

Removed spans are replaced by a line break, so a fence right after a closing tag or a
channel header starts its own line. Everything here is linear in the text.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field

#: Reasoning tag syntaxes: name -> (opening tag, closing tag).
TAGS: dict[str, tuple[str, str]] = {
    "think": ("<think>", "</think>"),
    "thinking": ("<thinking>", "</thinking>"),
    "seed": ("<seed:think>", "</seed:think>"),
    "kimi": ("◁think▷", "◁/think▷"),
    "mistral": ("[THINK]", "[/THINK]"),
    "cohere": ("<|START_THINKING|>", "<|END_THINKING|>"),
}
_ALL = (*TAGS, "granite", "harmony")
#: vLLM's ``--reasoning-parser`` names (and ``auto``, ``none``) -> the syntaxes they read.
REASONING_PARSERS: dict[str, tuple[str, ...]] = {
    "auto": _ALL,
    "none": (),
    "deepseek_r1": ("think",),
    "deepseek_v3": ("think",),
    "qwen3": ("think",),
    "glm45": ("think",),
    "ernie45": ("think",),
    "hunyuan_a13b": ("think",),
    "minimax_m2": ("think",),
    "minimax_m2_append_think": ("think",),
    "olmo3": ("think",),
    "step3": ("think",),
    "kimi_k2": ("think", "kimi"),
    "seed_oss": ("seed",),
    "mistral": ("mistral",),
    "cohere_command3": ("cohere",),
    "granite": ("granite",),
    "openai_gptoss": ("harmony",),
}

_GRANITE_THOUGHT = "Here is my thought process:"
_GRANITE_RESPONSE = "Here is my response:"
_HARMONY_HEAD = re.compile(r"(?:<\|start\|>([^<\n]{0,200}))?<\|channel\|>([^<\n]{0,200})"
                           r"(?:<\|constrain\|>[^<\n]{0,100})?<\|message\|>")
_HARMONY_END = re.compile(r"<\|(?:end|return|call)\|>")
_RECIPIENT = re.compile(r"\bto=(\S+)")
_CHANNEL = r"(?: to=([\w.\-]{1,200}))?(analysis|commentary|final)(?: to=([\w.\-]{1,200}))?"
#: A harmony header decoded without its special tokens: the first one (the prompt ended
#: with ``<|start|>assistant``), and the later ones (``assistant`` is the role's text).
_BARE_FIRST = re.compile(_CHANNEL)
_BARE_HEAD = re.compile("assistant" + _CHANNEL)
#: The first channel word glued to what follows (``analysisWe``, ``final```diff``), as a
#: decoded harmony header is, and as English text is not (``analysis: ...``, ``finally``).
_GLUED = re.compile(r"[^\s:,.;!?a-z]")
#: The constrained content type of a call (``<|constrain|>json`` decodes to `` json``).
_BARE_TYPE = re.compile(r" ?json(?=\s*[\[{])")


#: Spans of removed reasoning described in :attr:`Answer.dropped` (more are counted).
MAX_DROPPED_NOTES = 20


@dataclass
class Answer:
    """A completion's answer: ``text`` (reasoning removed), ``calls`` (tool calls the
    reasoning syntax itself delimits: harmony's messages to ``functions.*``, as ``{"name",
    "arguments"}`` dicts, in order) and ``dropped`` (what was removed, a short description
    per span, for the record)."""

    text: str
    calls: list[dict] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    more_dropped: int = 0
    #: Who split harmony messages: ``openai-harmony`` when the library read the token ids
    #: (:mod:`proctor.rl.harmony_tokens`), else None (this module's text reader, if any).
    reader: str | None = None

    def drop(self, what: str) -> None:
        """Note a removed span (the first :data:`MAX_DROPPED_NOTES`; the rest counted)."""
        if len(self.dropped) < MAX_DROPPED_NOTES:
            self.dropped.append(what)
        else:
            self.more_dropped += 1


def known_parser(kind: str, name: str, parsers: dict) -> str:
    """``name`` when it is a key of ``parsers`` (the ``kind`` of parser, for the message).

    Raises:
        ValueError: an unknown name (the message lists the known ones).
    """
    if name not in parsers:
        raise ValueError(f"unknown {kind} parser {name!r}; known: {', '.join(sorted(parsers))}")
    return name


def check_reasoning_parser(name: str) -> str:
    """``name`` when it is a known reasoning parser (:func:`known_parser`)."""
    return known_parser("reasoning", name, REASONING_PARSERS)


def answer(text: str, parser: str = "auto", token_ids=None) -> Answer:
    """The answer in ``text`` under the reasoning ``parser`` (a name of
    :data:`REASONING_PARSERS`). ``token_ids``: the completion's token ids, when the trainer
    has them; harmony's messages are then read from them by ``openai-harmony`` where it can
    (:mod:`proctor.rl.harmony_tokens`; ``Answer.reader`` says so).

    Raises:
        ValueError: an unknown parser name.
    """
    syntaxes = REASONING_PARSERS[check_reasoning_parser(parser)]
    out = Answer(text)
    if "harmony" in syntaxes and token_ids is not None and _library_harmony(out, token_ids):
        pass
    elif "harmony" in syntaxes and "<|channel|>" in text:
        _harmony(out)
    elif "harmony" in syntaxes:
        _bare_harmony(out, sure=syntaxes == ("harmony",))
    if "granite" in syntaxes:
        _granite(out)
    tags = [TAGS[s] for s in syntaxes if s in TAGS]
    if tags:
        _tags(out, tags)
    return out


_TEXT = re.compile(r"\S")


class DiffLines:
    """Where the lines of a text are, to tell a tag from text in a diff content line. Each
    line is read once (its first and last non-space character after the marker), so any
    number of questions about one long line stays linear."""

    def __init__(self, text: str):
        self.text = text
        self.breaks = [m.start() for m in re.finditer("\n", text)]
        self._lines: dict[int, tuple[int, int] | None] = {}

    def _line(self, k: int) -> tuple[int, int] | None:
        """(first, last) non-space positions after the marker of line ``k``, or None when
        it is no diff content line (or holds no text after its marker)."""
        if k not in self._lines:
            first = self.breaks[k - 1] + 1 if k else 0
            last = self.breaks[k] if k < len(self.breaks) else len(self.text)
            found = None
            if self.text[first:first + 1] in ("+", "-", " "):
                m = _TEXT.search(self.text, first + 1, last)
                if m is not None:
                    body = self.text[m.start():last].rstrip()
                    found = (m.start(), m.start() + len(body) - 1)
            self._lines[k] = found
        return self._lines[k]

    def in_diff_line(self, start: int, end: int) -> bool:
        """Whether ``text[start:end]`` is inside a diff content line: the line starts with
        ``+``, ``-`` or a space and has other text both before and after it."""
        span = self._line(bisect.bisect_left(self.breaks, start))
        return span is not None and span[0] < start and span[1] >= end


def _tags(out: Answer, pairs: list[tuple[str, str]]) -> None:
    """Drop tag-delimited reasoning (one pass, linear in the text)."""
    text = out.text
    closing_of = {o: c for o, c in pairs}
    pattern = re.compile("|".join(re.escape(t) for pair in pairs for t in pair))
    closings = set(closing_of.values())
    kept, pos, opened, opened_at = [], 0, None, 0
    lines = DiffLines(text)
    for m in pattern.finditer(text):
        tag = m.group(0)
        if lines.in_diff_line(m.start(), m.end()):
            continue  # code the diff adds or removes, e.g. ``+END = "</think>"``
        if opened is None and tag in closing_of:
            kept.append(text[pos:m.start()])
            opened, opened_at = tag, m.start()
        elif opened is None and tag in closings:  # closed, never opened: the prompt opened it
            out.drop(f"reasoning before a lone {tag} ({m.start()} characters)")
            kept, pos = [], m.end()
        elif opened is not None and tag == closing_of[opened]:
            out.drop(f"{opened}...{tag} reasoning ({m.end() - opened_at} characters)")
            opened, pos = None, m.end()
    if opened is None:
        kept.append(text[pos:])
    else:
        call = _first_call_opener(text, opened_at, lines)
        if call is None:
            out.drop(f"{opened} reasoning never closed ({len(text) - opened_at} characters)")
        else:  # a tool call ends it (Kimi K2, Qwen3.5): the call is the answer
            out.drop(f"{opened} reasoning ended by a tool call ({call - opened_at} characters)")
            kept.append(text[call:])
    out.text = "\n".join(kept) if len(kept) > 1 else "".join(kept)


#: What starts a tool call in some family's syntax (:mod:`proctor.rl.tool_calls`): it ends
#: reasoning that was never closed, as the families' own parsers read it.
_CALL_OPENER = re.compile(r"<tool_call>|<\|tool_calls_section_begin\|>|<\|tool_call_begin\|>"
                          r"|<｜tool▁calls▁begin｜>|<｜tool▁call▁begin｜>|\[TOOL_CALLS\]"
                          r"|<minimax:tool_call>|<seed:tool_call>|<function=")


def _first_call_opener(text: str, start: int, lines: DiffLines) -> int | None:
    """Where the first tool call after ``start`` begins (not in a diff line), or None."""
    for m in _CALL_OPENER.finditer(text, start):
        if not lines.in_diff_line(m.start(), m.end()):
            return m.start()
    return None


def _granite(out: Answer) -> None:
    stripped = out.text.lstrip()
    if not stripped.startswith(_GRANITE_THOUGHT):
        return
    cut = stripped.find(_GRANITE_RESPONSE)
    if cut < 0:
        out.drop("granite thought process, no response")
        out.text = ""
        return
    out.drop(f"granite thought process ({cut} characters)")
    out.text = stripped[cut + len(_GRANITE_RESPONSE):]


def _bare_harmony(out: Answer, sure: bool) -> None:
    """A harmony completion decoded without its special tokens (``sure``: the parser says
    the text is one): its messages split at the headers' words and kept as in
    :func:`_harmony`; text that is not one is left as it is."""
    text = out.text
    first = _BARE_FIRST.match(text)
    if first is None:
        return
    lines = DiffLines(text)
    heads = [first] + [h for h in _BARE_HEAD.finditer(text, first.end())
                       if not lines.in_diff_line(h.start(), h.end())]
    if len(heads) == 1 and not sure and not _GLUED.match(text, first.end()):
        return
    kept: list[str] = []
    for i, head in enumerate(heads):
        body = text[head.end():heads[i + 1].start() if i + 1 < len(heads) else len(text)]
        channel, recipient = head.group(2), head.group(1) or head.group(3)
        _keep(out, kept, channel, recipient, body, "decoded without its special tokens")
    out.text = "\n".join(kept)


def _keep(out: Answer, kept: list[str], channel: str, recipient: str | None, body: str,
          how: str = "") -> None:
    """One harmony message: a call to ``functions.*`` (its body the arguments), answer text
    (``final``; ``commentary`` to no one) kept, anything else dropped as reasoning."""
    if recipient and recipient.startswith("functions."):
        typed = _BARE_TYPE.match(body) if how else None
        out.calls.append({"name": recipient[len("functions."):],
                          "arguments": body[typed.end():] if typed else body})
    elif channel == "final" or (channel == "commentary" and recipient is None):
        kept.append(body)
    else:
        out.drop(f"harmony {channel or 'unnamed'} message ({len(body)} characters"
                 f"{', ' + how if how else ''})")


def _library_harmony(out: Answer, token_ids) -> bool:
    """Keep the answer messages and tool calls the library read from ``token_ids``; False
    when it could not (the text reader reads instead)."""
    from proctor.rl.harmony_tokens import LIBRARY, harmony_messages

    messages = harmony_messages(out.text, token_ids)
    if messages is None:
        return False
    kept: list[str] = []
    for channel, recipient, body in messages:
        _keep(out, kept, channel, recipient, body)
    out.text, out.reader = "\n".join(kept), LIBRARY
    return True


def _harmony(out: Answer) -> None:
    """Keep the answer messages of a harmony completion, and its tool calls."""
    text = out.text
    heads = list(_HARMONY_HEAD.finditer(text))
    if not heads:
        return
    lines = DiffLines(text)
    heads = [h for h in heads if not lines.in_diff_line(h.start(), h.end())]
    if not heads:
        return
    if text[:heads[0].start()].strip():
        out.drop(f"text before the first harmony message "
                           f"({heads[0].start()} characters)")
    kept: list[str] = []
    for i, head in enumerate(heads):
        stop = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        end = _HARMONY_END.search(text, head.end(), stop)
        body = text[head.end():end.start() if end else stop]
        role, channel_part = head.group(1) or "", head.group(2) or ""
        channel = (channel_part.split() or [""])[0]
        recipient = _RECIPIENT.search(f"{role} {channel_part}")
        _keep(out, kept, channel, recipient.group(1) if recipient else None, body)
    out.text = "\n".join(kept)
