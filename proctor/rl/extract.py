"""Finding the patch in a model completion as trainers really hand it over (pure).

:func:`extract_patch` rules, in order; the first that finds a patch wins:

1. **Explicit patch** (verl ``extra_info["patch"]``, a TRL ``patch`` column, an OpenRLHF
   label ``{"patch": ...}``): used as is, the completion is ignored.
2. **Messages** (a list of ``{"role", "content", "tool_calls"}`` dicts, OpenAI / TRL chat
   format, or one such dict; or OpenAI Responses output items, or a whole Responses
   ``response`` object): the assistant messages
   (every message when none has a role) and the model's call items (Responses
   ``function_call`` and ``custom_tool_call``, which carry no role) are searched from the
   last one back; in each, its ``tool_calls`` and ``tool_use`` content parts (last first,
   as in 3c), the call item itself, and then its ``content`` (a string, or the ``text`` /
   ``output_text`` parts of a list). Reasoning never counts: ``reasoning`` items,
   ``thinking`` / ``redacted_thinking`` parts and the ``reasoning_content`` /
   ``reasoning`` fields of a message are not read, nor are tool outputs
   (``function_call_output``, ``tool`` messages).
3. In one text (a string completion, a message's content):

   a. Chat special tokens are cut at the start (``<|im_start|>assistant``,
      ``<|start_header_id|>assistant<|end_header_id|>``, ``<s>``, ``<start_of_turn>model``,
      ``[TOOL_CALLS]``)
      and at the end (``</s>``, ``<|im_end|>``, ``<|endoftext|>``, ``<|eot_id|>``, ``<|end|>``,
      ``<eos>``, ``<｜end▁of▁sentence｜>``...), as OpenRLHF keeps them in its queries.
      Tokens inside the text stay: ``</s>`` is also an HTML tag a diff may add.
   b. **Reasoning is not the answer**, for every model family
      (:mod:`proctor.rl.reasoning`: ``<think>`` and each family's own tags, harmony's
      ``analysis`` channel, ...; ``reasoning_parser`` names which syntaxes to read,
      ``auto`` all of them). A draft diff in the reasoning never counts, even when the
      answer has none. A tag inside a diff content line (a line starting with ``+``,
      ``-`` or a space, with text before and after the tag: ``+END = "</think>"``) is
      code, not a tag; so in 3c. Harmony's messages to ``functions.*`` are tool calls
      (3c), tried before the rest of the answer.
   c. **Tool calls**, in every family's syntax (:mod:`proctor.rl.tool_calls`: Hermes
      ``<tool_call>{json}</tool_call>``, Qwen3-Coder / Seed-OSS ``<function=...>`` XML,
      GLM-4.5 ``<arg_key>``, Kimi K2 and DeepSeek tokens, Mistral ``[TOOL_CALLS]``,
      MiniMax ``<invoke>``, pythonic lists, JSON calls anywhere, several per line;
      ``tool_call_parser`` names which syntaxes to read, ``auto`` all of them), the last
      call first; then the whole text being a JSON object or array, the last fenced
      ``json`` block, or a JSON object starting a line after prose. The calls' spans are
      not searched again by 3d and 3e. The arguments are searched for string values under
      the keys ``patch``, ``diff`` or ``model_patch`` (a SWE-bench prediction's), in
      ``arguments``, ``parameters`` or ``input`` objects or JSON strings too, at any depth;
      such a string that is not JSON is the tool's raw input and counts like a ``patch``
      value; the last value holding a patch wins. JSON with raw newlines inside strings is
      accepted. Other keys (``content`` of a file write) never count.
   d. **The diffs of the answer**, fenced or bare, compete on position, not on form
      (:mod:`proctor.rl.diff_choice`): **per file, the last complete edit wins**; hunks of
      one file split over several diffs are joined when they do not overlap (a diff that
      starts with a hunk continues the file the diff before it ended with); an earlier
      overlapping hunk is a draft, left out. Markdown quote markers (``> ``) are removed
      first (no diff line starts with ``>``).

      *Fenced* (```` ``` ```` or ``~~~``, 3 or more, indented at most 3 spaces, a diff one
      any number: inside a list item): a block whose info string starts with ``diff``,
      ``patch`` or ``udiff`` and that holds a diff header or hunk line (``diff --git``,
      ``---``, ``+++``, ``@@``), or a block of any other info string (or none) whose body
      starts like a unified diff (``diff --git`` or a ``--- `` / ``+++ `` pair). A block
      closes at a fence line with the opening's indentation and at least its length,
      followed by nothing but spaces and special tokens (```` ```</s> ````); in a ``diff``
      block any line starting with the fence closes it (a diff line never starts with a
      backtick). A block never closed (the completion ended with EOS inside it) runs to
      the end of the text. An indented opening fence's indentation is removed from its
      body lines.

      *Bare*, outside fenced blocks, possibly after prose: from a line starting with
      ``diff --git `` (followed by git header lines or a hunk) or a ``--- `` / ``+++ `` /
      ``@@ -`` triple, through the lines a unified diff is made of (headers, hunks, `` ``,
      ``+``, ``-``, ``\\ No newline at end of file``; a blank line only while the hunk's
      counts still expect lines, as models strip the space of empty context lines); text
      after it is not part of it. A sentence that mentions ``diff --git`` is not a patch.
   e. When the answer has no diff, the blocks inside the last ``markdown`` / ``md`` /
      untagged block that has one are tried (a ```` ````markdown ```` wrapper around the
      ```` ```diff ```` block).
   f. Still none: an **edit in another format** (:mod:`proctor.rl.edit_formats`: the last
      V4A ``apply_patch`` patch, ``*** Begin Patch``, also as a tool's input, Codex's
      ``apply_patch`` shell command or Responses ``apply_patch_call`` items; else
      SEARCH/REPLACE blocks) is the answer: :attr:`Extraction.edit`, converted into a
      unified diff against the task's files when the completion is scored
      (:func:`proctor.rl.completions.converted`).

The patch is returned with its line endings byte for byte: a ``\\r`` before a newline may
be the repository file's own CRLF, which the apply step needs; only fence and diff-line
recognition ignore it. The apply step tries the patch as is, then with CRLF turned into LF
(a completion whose every line break is CRLF, against LF files), see
``proctor.patch.apply.APPLY_STRATEGIES``. A missing final newline is added. No patch
found: ``None`` (scored as ``no_patch``, reward 0.0).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from proctor.rl.diff_choice import Segment, choose
from proctor.rl.edit_formats import Edit, find_edit
from proctor.rl.reasoning import DiffLines, answer, check_reasoning_parser
from proctor.rl.tool_calls import check_tool_call_parser, find_calls

DIFF_LANGS = ("diff", "patch", "udiff")

#: A chat special token (``<|im_end|>``, ``</s>``, ``<｜end▁of▁sentence｜>``...), as a regex.
SPECIAL_TOKEN = (r"(?:<\|[A-Za-z0-9_.:\-]{1,40}\|>|<｜[^｜\n]{1,40}｜>|</?s>|<eos>|<bos>"
                 r"|<pad>|<end_of_turn>|<start_of_turn>|<\|?endoftext\|?>|\[TOOL_CALLS\])")
_TOKEN = SPECIAL_TOKEN
_LEAD = re.compile(rf"\A(?:\s*{_TOKEN}(?:[ \t]*(?:assistant|model)(?=\s|<))?)+\s*?(?:\r?\n)?")
_TRAIL = re.compile(rf"{_TOKEN}\Z")
_ONLY_TOKENS = re.compile(rf"[ \t]*(?:{_TOKEN}[ \t]*)*\Z")
_OPEN_FENCE = re.compile(r"( {0,16})(`{3,}|~{3,})(.*)\Z")
_HUNK = re.compile(r"@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")
#: A line a unified diff has: a ``diff --git``, ``---`` / ``+++`` header or a hunk header.
_DIFF_LINE = re.compile(r"^(?:diff --git |--- |\+\+\+ |@@ )", re.M)
_GIT_LINE = re.compile(r"diff --git \S+ \S+")
_GIT_HEADERS = ("index ", "--- ", "+++ ", "new file mode", "deleted file mode", "old mode",
                "new mode", "similarity index", "dissimilarity index", "rename from",
                "rename to", "copy from", "copy to", "Binary files", "diff --git ")
_WRAPPER_LANGS = ("markdown", "md", "")
_QUOTE = re.compile(r"^(?:>[ ]?)+", re.M)
_PATCH_KEYS = ("patch", "diff", "model_patch")
_NESTED_KEYS = ("arguments", "parameters", "input", "function")
_APPLY_PATCH_COMMANDS = ("apply_patch", "applypatch")
#: Content parts and items that hold the model's answer text.
_TEXT_PARTS = ("text", "output_text")
#: Items with no role that are the model's own tool calls (OpenAI Responses).
_CALL_ITEMS = ("function_call", "custom_tool_call")
#: Items that are never the answer: reasoning, and what tools returned.
_NOT_ANSWER = ("reasoning", "thinking", "redacted_thinking", "function_call_output",
               "custom_tool_call_output", "tool_result")


@dataclass
class Extraction:
    """What the extraction decided, for the record: ``patch`` (ending in a newline; None:
    no patch), ``source`` (where the patch came from: ``explicit``, ``tool_call``,
    ``fenced``, ``bare``; None without a patch), the ``reasoning_parser`` and
    ``tool_call_parser`` used, ``reasoning``
    (the reasoning spans removed, described), ``dropped`` (diffs and tool calls seen and
    left out, with why) and ``why`` (no patch: one line saying what was looked for).
    ``edit``: the answer is an edit in another format (V4A ``apply_patch``, SEARCH/REPLACE;
    :mod:`proctor.rl.edit_formats`), which becomes the patch once converted against the
    task's files (``patch`` is None until then)."""

    patch: str | None = None
    source: str | None = None
    reasoning_parser: str = "auto"
    tool_call_parser: str = "auto"
    reasoning: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    why: str | None = None
    edit: Edit | None = None
    #: ``openai-harmony`` when that library read harmony messages from the token ids
    #: (:mod:`proctor.rl.harmony_tokens`); None: Proctor's text reader read the text.
    reasoning_reader: str | None = None

    def details(self) -> dict:
        """The record's ``evidence["extraction"].details``: every field but the patch."""
        return {"source": self.source, "reasoning_parser": self.reasoning_parser,
                **({"reasoning_reader": self.reasoning_reader}
                   if self.reasoning_reader else {}),
                **({"edit_format": self.edit.format} if self.edit else {}),
                "tool_call_parser": self.tool_call_parser,
                "reasoning_removed": self.reasoning, "dropped": self.dropped,
                **({"why": self.why} if self.why else {})}


_EDIT_NAMES = {"v4a": "apply_patch (V4A)", "search_replace": "SEARCH/REPLACE"}
#: What an extraction that found nothing says it looked for.
NOT_FOUND = ("no patch in the answer: no tool call with a patch or diff argument, no fenced "
             "diff block, no bare unified diff (reasoning is not searched)")
#: Notes kept in :attr:`Extraction.dropped` (more are counted in one last note).
MAX_NOTES = 20


class _Seen:
    """The extraction under way: its parsers and the notes it collects."""

    def __init__(self, parser: str, tool_parser: str):
        self.out = Extraction(reasoning_parser=parser, tool_call_parser=tool_parser)
        self.more = 0
        self.edit_format: str | None = None  # what was found is an edit of this format

    @property
    def tool_parser(self) -> str:
        return self.out.tool_call_parser

    @property
    def parser(self) -> str:
        return self.out.reasoning_parser

    def note(self, where: list[str], what: str) -> None:
        if len(where) < MAX_NOTES:
            where.append(what)
        else:
            self.more += 1


def find_patch(completion: str | list | dict | None, explicit: str | None = None, *,
               reasoning_parser: str = "auto", tool_call_parser: str = "auto",
               token_ids=None) -> Extraction:
    """The patch in ``completion`` (a string, a message dict or a list of messages or
    Responses items) and how it was found; ``explicit`` wins when it is a non-blank
    string. ``reasoning_parser``: the reasoning syntaxes to remove (a name of
    :data:`proctor.rl.reasoning.REASONING_PARSERS`; ``auto``: all); ``tool_call_parser``:
    the tool-call syntaxes to read (a name of :data:`proctor.rl.tool_calls.TOOL_CALL_PARSERS`;
    ``auto``: all). ``token_ids``: a text completion's token ids, when the trainer has them
    (harmony's messages are then read from them by ``openai-harmony`` where it can:
    :mod:`proctor.rl.harmony_tokens`). The rules are in this module's docstring. Never
    raises for the completion.

    Raises:
        ValueError: an unknown parser name (a configuration error).
    """
    seen = _Seen(check_reasoning_parser(reasoning_parser),
                 check_tool_call_parser(tool_call_parser))
    out = seen.out
    if isinstance(explicit, str) and explicit.strip():
        out.patch, out.source = explicit, "explicit"
        return out
    if isinstance(completion, str):
        found = _from_text(completion, seen, token_ids=token_ids)
    elif isinstance(completion, dict | list):
        found = _from_messages(completion, seen)
    else:
        found = None
        out.why = f"the completion is a {type(completion).__name__}, not text or messages"
    if seen.more:
        out.dropped.append(f"... and {seen.more} more")
    if found is not None and seen.edit_format is not None:
        out.edit = Edit(seen.edit_format, found)
        out.why = (f"an {_EDIT_NAMES[seen.edit_format]} edit, not a unified diff: it is "
                   "converted against the task's files")
        return out
    if found is None or not found.strip():
        out.source, out.why = None, out.why or NOT_FOUND
        return out
    found = found.lstrip("\r\n")
    out.patch = found if found.endswith("\n") else found + "\n"
    return out


def extract_patch(completion: str | list | dict | None, explicit: str | None = None, *,
                  reasoning_parser: str = "auto", tool_call_parser: str = "auto"
                  ) -> str | None:
    """:func:`find_patch`'s patch: ending in a newline, or None when there is none.

    Raises:
        ValueError: an unknown parser name (a configuration error).
    """
    return find_patch(completion, explicit, reasoning_parser=reasoning_parser,
                      tool_call_parser=tool_call_parser).patch


# --------------------------------------------------------------------------- messages, JSON


def _from_messages(completion: dict | list, seen: _Seen) -> str | None:
    if isinstance(completion, dict) and isinstance(completion.get("output"), list) and \
            completion.get("object") == "response":  # a whole Responses API response
        completion = completion["output"]
    if isinstance(completion, dict):
        if not ({"role", "content", "tool_calls"} & completion.keys()) and \
                completion.get("type") not in _CALL_ITEMS:
            return _from_json(completion, seen, "the JSON object")
        completion = [completion]
    msgs = [m for m in completion if isinstance(m, dict)]
    v4a = _apply_patch_calls(msgs)
    if v4a is not None and (found := _from_text(v4a, seen, tools=False)) is not None:
        seen.out.source = "tool_call"
        return found
    any_role = any("role" in m for m in msgs)
    msgs = [m for m in msgs if _is_model_item(m, any_role)]
    for msg in reversed(msgs):
        content = msg.get("content")
        parts = content if isinstance(content, list) else []
        tool_calls = msg.get("tool_calls")
        calls = [*(tool_calls if isinstance(tool_calls, list) else []),
                 *(p for p in parts if isinstance(p, dict) and p.get("type") == "tool_use")]
        if msg.get("type") in _CALL_ITEMS or not (
                {"role", "content", "tool_calls", "type"} & msg.keys()):
            calls.append(msg)  # a call item, or plain JSON (a SWE-bench prediction)
        for call in reversed(calls):
            if isinstance(call, dict) and (
                    found := _from_json(call, seen, _call_name(call))) is not None:
                return found
        if (found := _from_text(_content_text(content), seen)) is not None:
            return found
    return None


def _call_name(call) -> str:
    """How a tool call is named in the notes: ``tool call NAME``."""
    if isinstance(call, dict):
        inner = call.get("function")
        name = (inner.get("name") if isinstance(inner, dict) else None) or call.get("name")
        if isinstance(name, str) and name:
            return f"tool call {name[:60]}"
    return "a tool call"


#: Responses ``apply_patch_call`` operations -> the V4A section they stand for.
_OPERATIONS = {"create_file": "Add File", "update_file": "Update File",
               "delete_file": "Delete File"}


def _apply_patch_calls(items: list[dict]) -> str | None:
    """The V4A patch the Responses ``apply_patch_call`` items make together (one item per
    file; ``operation.diff`` holds the file's V4A hunks), or None without such items."""
    sections = []
    for item in items:
        op = item.get("operation") if item.get("type") == "apply_patch_call" else None
        if not isinstance(op, dict) or op.get("type") not in _OPERATIONS or \
                not isinstance(op.get("path"), str):
            continue
        diff = op.get("diff") if isinstance(op.get("diff"), str) else ""
        sections.append(f"*** {_OPERATIONS[op['type']]}: {op['path']}\n{diff}"
                        + ("" if diff.endswith("\n") or not diff else "\n"))
    if not sections:
        return None
    return "*** Begin Patch\n" + "".join(sections) + "*** End Patch\n"


def _is_model_item(item: dict, any_role: bool) -> bool:
    """An assistant message or a call item of the model (every item when none has a
    role); never reasoning or a tool's output."""
    if item.get("type") in _NOT_ANSWER:
        return False
    if "role" in item:
        return item.get("role") == "assistant"
    return item.get("type") in _CALL_ITEMS or not any_role


def _content_text(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text") or "") for p in content
                         if isinstance(p, dict) and p.get("type", "text") in _TEXT_PARTS)
    return ""


def _loads(text: str):
    try:
        return json.loads(text, strict=False)
    except (ValueError, RecursionError):
        return None


def _json_values(value, depth: int = 0):
    """String values under patch/diff keys, in document order (JSON strings in nested
    argument keys parsed)."""
    if depth > 8:
        return
    if isinstance(value, list):
        if len(value) >= 2 and value[0] in _APPLY_PATCH_COMMANDS and isinstance(value[1], str):
            yield value[1]  # Codex's shell tool running ``apply_patch PATCH``
        for item in value:
            yield from _json_values(item, depth + 1)
    elif isinstance(value, dict):
        for key, item in value.items():
            if key in _PATCH_KEYS and isinstance(item, str):
                yield item
            elif key in _NESTED_KEYS and isinstance(item, str):
                parsed = _loads(item)
                if parsed is None:
                    yield item  # not JSON: the tool's raw text (``apply_patch`` input)
                else:
                    yield from _json_values(parsed, depth + 1)
            elif isinstance(item, dict | list):
                yield from _json_values(item, depth + 1)


def _from_json(value, seen: _Seen, what: str) -> str | None:
    """The patch in a parsed JSON ``value`` (``what`` names it in the notes: a tool call,
    a fenced JSON block...); its source is ``tool_call``."""
    if value is None:
        return None
    for raw in reversed(list(_json_values(value))):
        if (found := _from_text(raw, seen, tools=False)) is not None:
            seen.out.source = "tool_call"
            return found
    seen.note(seen.out.dropped, f"{what}: no patch or diff argument holding a diff")
    return None


# --------------------------------------------------------------------------- text


def _strip_tokens(text: str) -> str:
    """``text`` without the special tokens (and spaces) at its end and start."""
    end = len(text)
    while True:
        while end > 0 and text[end - 1].isspace():
            end -= 1
        m = _TRAIL.search(text, max(0, end - 64), end)
        if m is None:
            break
        end = m.start()
    text = text[:end]
    m = _LEAD.match(text)
    return text[m.end():] if m else text


def _from_text(text: str, seen: _Seen, tools: bool = True,  # noqa: C901
               token_ids=None) -> str | None:
    said = answer(text, seen.parser, token_ids)
    seen.out.reasoning_reader = seen.out.reasoning_reader or said.reader
    for what in said.dropped:
        seen.note(seen.out.reasoning, what)
    seen.more += said.more_dropped
    text = said.text
    if tools:  # before the special tokens go: [TOOL_CALLS] and DeepSeek's open calls
        for call in reversed(said.calls):
            if (found := _from_json(call, seen, _call_name(call))) is not None:
                return found
        lines = DiffLines(text)
        calls = [c for c in find_calls(text, seen.tool_parser)
                 if not lines.in_diff_line(c.start, c.start + 1)]
        for call in reversed(calls):
            if isinstance(call.arguments, str) and not call.name:
                seen.note(seen.out.dropped, "a tool call whose JSON does not parse")
            elif (found := _from_json(call.as_json(), seen,
                                      _call_name(call.as_json()))) is not None:
                return found
        kept, pos = [], 0
        for call in calls:
            if call.start >= pos:
                kept.append(text[pos:call.start])
                pos = call.end
        text = _strip_tokens("".join(kept) + text[pos:])
        if text.lstrip().startswith(("{", "[")) and (doc := _loads(text.strip())) is not None:
            if (found := _from_json(doc, seen, "the JSON answer")) is not None:
                return found
    else:
        text = _strip_tokens(text)
    # markdown quotes go (no diff line starts with ">"): a diff quoted is a diff
    lines = _QUOTE.sub("", text).split("\n")
    blocks, outside = _fenced_blocks(lines)
    if tools:
        for lang, body, _ in reversed(blocks):
            if lang == "json" and (found := _from_json(
                    _loads(body.strip()), seen, "a fenced json block")) is not None:
                return found
        after_prose = _json_after_prose(text)
        if (found := _from_json(after_prose, seen, _call_name(after_prose))) is not None:
            return found
    segments = [Segment(body, "fenced", start) for lang, body, start in blocks
                if (lang in DIFF_LANGS and _DIFF_LINE.search(body)) or _starts_like_diff(body)]
    segments += [Segment(diff, "bare", start) for diff, start in _bare_diffs(lines, outside)]
    if segments:
        choice = choose(segments)
        for note in choice.notes:
            seen.note(seen.out.dropped, note)
        if choice.patch is not None:
            seen.out.source = choice.kind
            return choice.patch
    for lang, body, _ in reversed(blocks):
        if lang in _WRAPPER_LANGS:
            inner, _ = _fenced_blocks(body.split("\n"))
            found = [b for lang_, b, _ in inner
                     if (lang_ in DIFF_LANGS and _DIFF_LINE.search(b)) or _starts_like_diff(b)]
            if found:
                seen.out.source = "fenced"
                return found[-1]
    edit = find_edit(text)  # before the quote markers go: ">>>>>>> REPLACE" is no quote
    if edit is not None:
        seen.edit_format, seen.out.source = edit.format, edit.format
        return edit.text
    return None


def _json_after_prose(text: str):
    """The JSON object starting at the first line that starts with ``{`` (prose before
    it, anything after it), or None."""
    m = re.search(r"^\{", text, re.M)
    if m is None:
        return None
    try:
        return json.JSONDecoder(strict=False).raw_decode(text, m.start())[0]
    except (ValueError, RecursionError):
        return None


def _fenced_blocks(lines: list[str]) -> tuple[list[tuple[str, str, int]], list[bool]]:
    """(info word lowercased, body, line of the opening fence) of every fenced block, and
    per line whether it is outside every block. A fence is indented at most 3 spaces, a
    ``diff`` / ``patch`` / ``udiff`` one any number (inside a list item)."""
    blocks, outside = [], [True] * len(lines)
    i = 0
    while i < len(lines):
        m = _OPEN_FENCE.match(lines[i].rstrip("\r"))
        if m is None or (m.group(2)[0] == "`" and "`" in m.group(3)):
            i += 1
            continue
        indent, fence, info = len(m.group(1)), m.group(2), m.group(3).strip()
        lang = info.split()[0].lower() if info else ""
        if indent > 3 and lang not in DIFF_LANGS:
            i += 1
            continue
        body, j = [], i + 1
        while j < len(lines):
            line = lines[j]
            bare = line.rstrip("\r")
            if bare[:indent] == " " * indent and bare[indent:].startswith(fence):
                rest = bare[indent:].lstrip(fence[0])
                if _ONLY_TOKENS.match(rest) or lang in DIFF_LANGS:
                    break
            body.append(line[indent:] if line[:indent] == " " * indent else line.lstrip(" "))
            j += 1
        for k in range(i, min(j + 1, len(lines))):
            outside[k] = False
        blocks.append((lang, "\n".join(body) + ("\n" if j < len(lines) else ""), i))
        i = j + 1
    return blocks, outside


def _starts_like_diff(body: str) -> bool:
    lines = body.lstrip("\r\n").split("\n", 2)
    first = lines[0].rstrip("\r")
    if first.startswith("diff --git "):
        return True
    return len(lines) > 1 and first.startswith("--- ") and lines[1].startswith("+++ ")


def _bare_diffs(lines: list[str], outside: list[bool]) -> list[tuple[str, int]]:
    """(text, first line) of every diff outside the fenced blocks."""
    found, i = [], 0
    while i < len(lines):
        if outside[i] and _diff_starts_at(lines, i):
            end = _diff_end(lines, i)
            found.append(("\n".join(lines[i:end]) + "\n", i))
            i = end
        else:
            i += 1
    return found


def _diff_starts_at(lines: list[str], i: int) -> bool:
    first = lines[i].rstrip("\r")
    nxt = [ln.rstrip("\r") for ln in lines[i + 1:i + 3]]
    if first.startswith("diff --git "):
        return (_GIT_LINE.fullmatch(first) is not None and len(nxt) > 0
                and (nxt[0].startswith(_GIT_HEADERS) or _HUNK.match(nxt[0]) is not None))
    return (first.startswith("--- ") and len(nxt) == 2 and nxt[0].startswith("+++ ")
            and _HUNK.match(nxt[1]) is not None)


def _count(group: str | None) -> int:
    return 1 if group is None else int(group)


def _diff_end(lines: list[str], start: int) -> int:
    """Index after the last line of the bare diff starting at ``start``. Fence-like lines
    are diff lines here: a markdown file's context line is a space and a fence."""
    old = new = 0
    i = start
    while i < len(lines):
        line = lines[i].rstrip("\r")
        hunk = _HUNK.match(line)
        if hunk:
            old, new = _count(hunk.group(1)), _count(hunk.group(2))
        elif line.startswith("diff --git ") or (old <= 0 and new <= 0
                                                 and line.startswith(_GIT_HEADERS)):
            old = new = 0
        elif line.startswith("\\"):
            pass
        elif line == "":
            if old <= 0 and new <= 0:
                break
            old, new = old - 1, new - 1
        elif line[0] in " +-":
            old -= line[0] != "+"
            new -= line[0] != "-"
        else:
            break
        i += 1
    while i > start + 1 and lines[i - 1].strip() == "" and (old > 0 or new > 0):
        i -= 1  # blank lines a short hunk did not need: the prose's spacing
    return i
