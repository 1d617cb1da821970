"""Finding the patch in a model completion as trainers really hand it over (pure).

:func:`extract_patch` rules, in order; the first that finds a patch wins:

1. **Explicit patch** (verl ``extra_info["patch"]``, a TRL ``patch`` column, an OpenRLHF
   label ``{"patch": ...}``): used as is, the completion is ignored.
2. **Messages** (a list of ``{"role", "content", "tool_calls"}`` dicts, OpenAI / TRL chat
   format, or one such dict): the assistant messages (every message when none has a role)
   are searched from the last one back; in each, its ``tool_calls`` and ``tool_use``
   content parts (last first, as in 3c) and then its ``content`` (a string, or the
   ``{"type": "text", "text"}`` parts of a list).
3. In one text (a string completion, a message's content):

   a. Chat special tokens are cut at the start (``<|im_start|>assistant``,
      ``<|start_header_id|>assistant<|end_header_id|>``, ``<s>``, ``<start_of_turn>model``,
      ``[TOOL_CALLS]``)
      and at the end (``</s>``, ``<|im_end|>``, ``<|endoftext|>``, ``<|eot_id|>``, ``<|end|>``,
      ``<eos>``, ``<｜end▁of▁sentence｜>``...), as OpenRLHF keeps them in its queries.
      Tokens inside the text stay: ``</s>`` is also an HTML tag a diff may add.
   b. **Reasoning is not the answer**: ``<think>...</think>`` (and ``<thinking>``) blocks are
      dropped, as is everything before a lone ``</think>`` (the template opened it in the
      prompt) and after a ``<think>`` never closed (the completion ran out while reasoning).
      A draft diff in the reasoning never counts, even when the answer has none. A tag
      inside a diff content line (a line starting with ``+``, ``-`` or a space, with text
      before and after the tag: ``+END = "</think>"``) is code, not a tag; so in 3c.
   c. **Tool calls**: ``<tool_call>{json}</tool_call>`` blocks (Qwen / Hermes; the closing tag
      may be missing at the end), the whole text being a JSON object or array (Mistral's
      ``[TOOL_CALLS][...]`` too), the last fenced ``json`` block, or a JSON object starting
      a line after prose. The JSON is searched for string values under the keys ``patch``
      or ``diff`` (in ``arguments``, ``parameters`` or ``input`` objects or JSON strings
      too, at any depth; such a string that is not JSON is the tool's raw input and counts
      like a ``patch`` value); the last value holding a patch wins. JSON with raw newlines
      inside strings is accepted. Other keys (``content`` of a file write) never count.
   d. **Fenced blocks** (```` ``` ```` or ``~~~``, 3 or more): the **last** block whose info
      string starts with ``diff``, ``patch`` or ``udiff``; else the last block of any other
      info string (or none) whose body starts like a unified diff (``diff --git`` or a
      ``--- `` / ``+++ `` pair). Earlier such blocks whose ``---`` / ``+++`` lines name only
      files no later kept block names are joined before it, in order (a diff given one
      block per file); one naming a file a later block changes is a draft, left out.
      A block closes at a fence line with the opening's indentation and at least its
      length, followed by nothing but spaces and special tokens
      (```` ```</s> ````); in a ``diff`` block any line starting with the fence closes it (a
      diff line never starts with a backtick). A block never closed (the completion ended
      with EOS inside it) runs to the end of the text. An indented opening fence's
      indentation is removed from its body lines. When no block qualifies, the blocks
      inside the last ``markdown`` / ``md`` / untagged block that has one are tried the
      same way (a ```` ````markdown ```` wrapper around the ```` ```diff ```` block).
   e. **A bare diff**, outside fenced blocks, possibly after prose: from a line starting with
      ``diff --git `` (followed by git header lines or a hunk) or a ``--- `` / ``+++ `` /
      ``@@ -`` triple, through the lines a unified diff is made of (headers, hunks, `` ``,
      ``+``, ``-``, ``\\ No newline at end of file``; a blank line only while the hunk's
      counts still expect lines, as models strip the space of empty context lines); text
      after it is not part of it. The last bare diff wins, joined with earlier ones as in
      3d. A sentence that mentions
      ``diff --git`` is not a patch.

The patch is returned with its line endings byte for byte: a ``\\r`` before a newline may
be the repository file's own CRLF, which the apply step needs; only fence and diff-line
recognition ignore it. The apply step tries the patch as is, then with CRLF turned into LF
(a completion whose every line break is CRLF, against LF files), see
``proctor.patch.apply.APPLY_STRATEGIES``. A missing final newline is added. No patch
found: ``None`` (scored as ``no_patch``, reward 0.0).
"""

from __future__ import annotations

import bisect
import json
import re

DIFF_LANGS = ("diff", "patch", "udiff")

#: A chat special token (``<|im_end|>``, ``</s>``, ``<｜end▁of▁sentence｜>``...), as a regex.
SPECIAL_TOKEN = (r"(?:<\|[A-Za-z0-9_.:\-]{1,40}\|>|<｜[^｜\n]{1,40}｜>|</?s>|<eos>|<bos>"
                 r"|<pad>|<end_of_turn>|<start_of_turn>|<\|?endoftext\|?>|\[TOOL_CALLS\])")
_TOKEN = SPECIAL_TOKEN
_LEAD = re.compile(rf"\A(?:\s*{_TOKEN}(?:[ \t]*(?:assistant|model)(?=\s|<))?)+\s*?(?:\r?\n)?")
_TRAIL = re.compile(rf"{_TOKEN}\Z")
_ONLY_TOKENS = re.compile(rf"[ \t]*(?:{_TOKEN}[ \t]*)*\Z")
_THINK_TAG = re.compile(r"<(/?)(think|thinking)>")
_TOOL_CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.S)
_OPEN_FENCE = re.compile(r"( {0,3})(`{3,}|~{3,})(.*)\Z")
_HUNK = re.compile(r"@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")
_GIT_LINE = re.compile(r"diff --git \S+ \S+")
_GIT_HEADERS = ("index ", "--- ", "+++ ", "new file mode", "deleted file mode", "old mode",
                "new mode", "similarity index", "dissimilarity index", "rename from",
                "rename to", "copy from", "copy to", "Binary files", "diff --git ")
_WRAPPER_LANGS = ("markdown", "md", "")
_PATCH_KEYS = ("patch", "diff")
_NESTED_KEYS = ("arguments", "parameters", "input", "function")


def extract_patch(completion: str | list | dict | None, explicit: str | None = None
                  ) -> str | None:
    """The patch in ``completion`` (a string, a message dict or a list of messages), ending
    in a newline, or None when there is none; ``explicit`` wins when it is a non-blank
    string. The rules
    are in this module's docstring. Never raises."""
    if isinstance(explicit, str) and explicit.strip():
        return explicit
    if isinstance(completion, str):
        found = _from_text(completion)
    elif isinstance(completion, dict | list):
        found = _from_messages(completion)
    else:
        found = None
    if found is None or not found.strip():
        return None
    found = found.lstrip("\r\n")
    return found if found.endswith("\n") else found + "\n"


# --------------------------------------------------------------------------- messages, JSON


def _from_messages(completion: dict | list) -> str | None:
    if isinstance(completion, dict):
        if not ({"role", "content", "tool_calls"} & completion.keys()):
            return _from_json(completion)
        completion = [completion]
    msgs = [m for m in completion if isinstance(m, dict)]
    if any("role" in m for m in msgs):
        msgs = [m for m in msgs if m.get("role") == "assistant"]
    for msg in reversed(msgs):
        content = msg.get("content")
        parts = content if isinstance(content, list) else []
        tool_calls = msg.get("tool_calls")
        calls = [*(tool_calls if isinstance(tool_calls, list) else []),
                 *(p for p in parts if isinstance(p, dict) and p.get("type") == "tool_use")]
        for call in reversed(calls):
            if isinstance(call, dict) and (found := _from_json(call)) is not None:
                return found
        if (found := _from_text(_content_text(content))) is not None:
            return found
    return None


def _content_text(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text") or "") for p in content
                         if isinstance(p, dict) and p.get("type", "text") == "text")
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


def _from_json(value) -> str | None:
    for raw in reversed(list(_json_values(value))):
        if (found := _from_text(raw, tools=False)) is not None:
            return found
    return None


# --------------------------------------------------------------------------- text


class _Lines:
    """Where the lines of a text are, to tell a tag from text in a diff line."""

    def __init__(self, text: str):
        self.text = text
        self.breaks = [m.start() for m in re.finditer("\n", text)]

    def in_diff_line(self, start: int, end: int) -> bool:
        """Whether ``text[start:end]`` is inside a diff content line: the line starts with
        ``+``, ``-`` or a space and has other text both before and after it."""
        k = bisect.bisect_left(self.breaks, start)
        first = self.breaks[k - 1] + 1 if k else 0
        last = self.breaks[k] if k < len(self.breaks) else len(self.text)
        return (self.text[first:first + 1] in ("+", "-", " ")
                and bool(self.text[first + 1:start].strip())
                and bool(self.text[end:last].strip()))


def _without_reasoning(text: str) -> str:
    """``text`` without reasoning blocks, one pass (linear in the text)."""
    kept, pos, opened = [], 0, None
    lines = _Lines(text)
    for m in _THINK_TAG.finditer(text):
        if lines.in_diff_line(m.start(), m.end()):
            continue  # code the diff adds or removes, e.g. ``+END = "</think>"``
        closing, name = m.group(1) == "/", m.group(2)
        if opened is None and not closing:
            kept.append(text[pos:m.start()])
            opened = name
        elif opened is None:  # a close with no open: the prompt opened it
            kept, pos = [], m.end()
        elif closing and name == opened:
            opened, pos = None, m.end()
    if opened is None:
        kept.append(text[pos:])
    return "".join(kept)


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


def _answer(text: str) -> str:
    return _strip_tokens(_without_reasoning(text))


def _from_text(text: str, tools: bool = True) -> str | None:  # noqa: C901
    text = _answer(text)
    if tools:
        lines = _Lines(text)
        calls = [m for m in _TOOL_CALL.finditer(text)
                 if not lines.in_diff_line(m.start(), m.start() + len("<tool_call>"))]
        for m in reversed(calls):
            if (found := _from_json(_loads(m.group(1).strip()))) is not None:
                return found
        kept, pos = [], 0
        for m in calls:
            kept.append(text[pos:m.start()])
            pos = m.end()
        text = "".join(kept) + text[pos:]
        if text.lstrip().startswith(("{", "[")) and (doc := _loads(text.strip())) is not None:
            if (found := _from_json(doc)) is not None:
                return found
    lines = text.split("\n")
    blocks, outside = _fenced_blocks(lines)
    if tools:
        for lang, body in reversed(blocks):
            if lang == "json" and (found := _from_json(_loads(body.strip()))) is not None:
                return found
        if (found := _from_json(_json_after_prose(text))) is not None:
            return found
    tagged = [body for lang, body in blocks if lang in DIFF_LANGS and body.strip()]
    if tagged:
        return _joined(tagged)
    diffs = [body for lang, body in blocks if _starts_like_diff(body)]
    if diffs:
        return _joined(diffs)
    for lang, body in reversed(blocks):
        if lang in _WRAPPER_LANGS:
            inner, _ = _fenced_blocks(body.split("\n"))
            found = [b for lang_, b in inner
                     if (lang_ in DIFF_LANGS and b.strip()) or _starts_like_diff(b)]
            if found:
                return found[-1]
    bare = _bare_diffs(lines, outside)
    return _joined(bare) if bare else None


_FILE_LINE = re.compile(r"(?:--- |\+\+\+ )(?:[ab]/)?(\S+)")


def _files(diff: str) -> set[str]:
    """Paths a diff's ``---`` / ``+++`` header lines name (``/dev/null`` left out)."""
    return {m.group(1) for m in _FILE_LINE.finditer(diff)
            if m.start() == 0 or diff[m.start() - 1] == "\n"} - {"/dev/null", "dev/null"}


def _joined(diffs: list[str]) -> str:
    """The last diff, after the earlier ones that name only files no later kept one does
    (one diff per file); an earlier diff of a file a later one changes is a draft."""
    kept, seen = [diffs[-1]], _files(diffs[-1])
    if not seen:
        return diffs[-1]
    for diff in reversed(diffs[:-1]):
        files = _files(diff)
        if files and not files & seen:
            kept.append(diff if diff.endswith("\n") else diff + "\n")
            seen |= files
    return "".join(reversed(kept))


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


def _fenced_blocks(lines: list[str]) -> tuple[list[tuple[str, str]], list[bool]]:
    """(info word lowercased, body) of every fenced block, and per line whether it is
    outside every block."""
    blocks, outside = [], [True] * len(lines)
    i = 0
    while i < len(lines):
        m = _OPEN_FENCE.match(lines[i].rstrip("\r"))
        if m is None or (m.group(2)[0] == "`" and "`" in m.group(3)):
            i += 1
            continue
        indent, fence, info = len(m.group(1)), m.group(2), m.group(3).strip()
        lang = info.split()[0].lower() if info else ""
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
        blocks.append((lang, "\n".join(body) + ("\n" if j < len(lines) else "")))
        i = j + 1
    return blocks, outside


def _starts_like_diff(body: str) -> bool:
    lines = body.lstrip("\r\n").split("\n", 2)
    first = lines[0].rstrip("\r")
    if first.startswith("diff --git "):
        return True
    return len(lines) > 1 and first.startswith("--- ") and lines[1].startswith("+++ ")


def _bare_diffs(lines: list[str], outside: list[bool]) -> list[str]:
    found, i = [], 0
    while i < len(lines):
        if outside[i] and _diff_starts_at(lines, i):
            end = _diff_end(lines, i)
            found.append("\n".join(lines[i:end]) + "\n")
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
