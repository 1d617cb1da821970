"""Tool calls in a completion's answer text, in every model family's syntax (pure).

A trainer hands the reward function decoded text; an inference server's tool-call parser
(vLLM's ``--tool-call-parser``) never ran on it. :func:`find_calls` reads the syntaxes the
families write (the parser names are vLLM's, :data:`TOOL_CALL_PARSERS`; ``auto``, the
default, reads them all):

* ``hermes``: ``<tool_call>{"name", "arguments"}</tool_call>`` (Qwen2.5, Qwen3, Hermes); the
  closing tag may be missing at the end;
* ``qwen3_coder`` / ``qwen3_xml`` / ``seed_oss``: ``<function=NAME><parameter=KEY>VALUE
  </parameter></function>`` (inside ``<tool_call>`` or ``<seed:tool_call>``, or bare; one
  line break around a value is the template's, not the value's);
* ``glm45``: ``<tool_call>NAME<arg_key>KEY</arg_key><arg_value>VALUE</arg_value>
  </tool_call>``;
* ``kimi_k2``: ``<|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>{...}
  <|tool_call_end|>``;
* ``deepseek_v31`` / ``deepseek_v3``: ``<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}
  <｜tool▁call▁end｜>`` (V3: ``function<｜tool▁sep｜>NAME`` and a fenced ``json`` body);
* ``mistral``: ``[TOOL_CALLS]NAME[ARGS]{...}`` (v11 tokenizers, one per call) and
  ``[TOOL_CALLS][{...}, ...]`` (older), anywhere in the text;
* ``minimax_m2``: ``<invoke name="NAME"><parameter name="KEY">VALUE</parameter></invoke>``;
* ``pythonic`` / ``llama4_pythonic``: a Python list of calls, ``[name(key="value"), ...]``,
  at the start of a line (or after ``<|python_start|>``), its arguments literals;
* ``llama3_json`` (and any family writing plain JSON): a JSON object with a ``name`` and
  ``arguments`` / ``parameters`` anywhere, several on one line (``; `` between them) or
  in a list.

Each call is a :class:`Call`: its name, its arguments (a dict when they parse as JSON or
keyword literals, else the raw text), where it stands in the text. Finding them is linear
in the text: every syntax is one regular-expression pass, and the JSON and Python readers
start only at a bounded number of anchors.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass

from proctor.patch.ast_parse import parse
from proctor.rl.reasoning import known_parser

#: vLLM's ``--tool-call-parser`` names (and ``auto``, ``none``) -> the syntaxes they read.
_ALL = ("hermes", "xml", "glm45", "kimi_k2", "deepseek", "mistral", "minimax", "pythonic",
        "json")
TOOL_CALL_PARSERS: dict[str, tuple[str, ...]] = {
    "auto": _ALL,
    "none": (),
    "hermes": ("hermes", "json"),
    "qwen3_coder": ("xml",),
    "qwen3_xml": ("xml",),
    "seed_oss": ("xml",),
    "glm45": ("glm45",),
    "glm47": ("glm45",),
    "kimi_k2": ("kimi_k2",),
    "deepseek_v3": ("deepseek",),
    "deepseek_v31": ("deepseek",),
    "mistral": ("mistral",),
    "minimax_m2": ("minimax",),
    "pythonic": ("pythonic",),
    "llama4_pythonic": ("pythonic",),
    "llama3_json": ("json",),
    "openai": (),  # harmony: its calls are messages (proctor.rl.reasoning)
}
#: Anchors the JSON and Python readers start at, at most (the last ones in the text).
MAX_ANCHORS = 64
#: Characters the Python reader parses, at most, as a multiple of the text's length.
PYTHON_BUDGET = 4
#: Closing brackets a Python call list may end at that the reader tries, per anchor.
PYTHON_ENDS = 3


@dataclass(frozen=True)
class Call:
    """One tool call: ``name``, ``arguments`` (a dict, or the raw text when it is not
    JSON / literals), and ``start`` / ``end`` (its span in the text)."""

    name: str
    arguments: dict | str
    start: int
    end: int

    def as_json(self) -> dict:
        """The call as OpenAI's chat format has it: ``{"name", "arguments"}``."""
        return {"name": self.name, "arguments": self.arguments}


def check_tool_call_parser(name: str) -> str:
    """``name`` when it is a known tool-call parser
    (:func:`~proctor.rl.reasoning.known_parser`)."""
    return known_parser("tool-call", name, TOOL_CALL_PARSERS)


def find_calls(text: str, parser: str = "auto") -> list[Call]:
    """The tool calls in ``text`` under ``parser`` (a name of :data:`TOOL_CALL_PARSERS`),
    in text order, none overlapping another (the one that starts first wins).

    Raises:
        ValueError: an unknown parser name.
    """
    syntaxes = TOOL_CALL_PARSERS[check_tool_call_parser(parser)]
    found: dict[tuple, Call] = {}
    for syntax in syntaxes:
        for call in _READERS[syntax](text):
            # the calls of one list share its span: keep them all, once each
            found.setdefault((call.start, call.end, call.name, repr(call.arguments)),
                             call)
    out: list[Call] = []
    for call in sorted(found.values(), key=lambda c: (c.start, -c.end)):
        if not out or call.start >= out[-1].end or (
                (call.start, call.end) == (out[-1].start, out[-1].end)):
            out.append(call)
    return out


def _loads(raw: str) -> dict | str:
    try:
        value = json.loads(raw, strict=False)
    except (ValueError, RecursionError):
        return raw
    return value if isinstance(value, dict) else raw


def _value(raw: str) -> str:
    """A parameter's text without the one line break the templates put around it."""
    if raw.startswith("\r\n"):
        raw = raw[2:]
    elif raw.startswith("\n"):
        raw = raw[1:]
    if raw.endswith("\r\n"):
        raw = raw[:-2]
    elif raw.endswith("\n"):
        raw = raw[:-1]
    return raw


def _params(pattern: re.Pattern, body: str) -> dict:
    """Parameter name -> text of every ``pattern`` match (groups: name, value) in
    ``body``; a value that is JSON (a number, a list) stays text: the tools take text."""
    return {m.group(1).strip(): _value(m.group(2)) for m in pattern.finditer(body)}


# --------------------------------------------------------------------------- XML-like syntaxes

_HERMES = re.compile(r"<tool_call>\s*+(\{.*?)(?:</tool_call>|\Z)", re.S)
_XML_FUNCTION = re.compile(r"<function=([^>\n]{1,200})>(.*?)(?:</function>|\Z)", re.S)
_XML_PARAM = re.compile(r"<parameter=([^>\n]{1,200})>(.*?)"
                        r"(?:</parameter>|(?=<parameter=)|(?=</function>)|\Z)", re.S)
_GLM = re.compile(r"<tool_call>([^\s<{][^\s<]{0,200})\s*+(<arg_key>.*?)(?:</tool_call>|\Z)",
                  re.S)
_GLM_ARG = re.compile(r"<arg_key>([^<]{0,200})</arg_key>\s*+<arg_value>(.*?)(?:</arg_value>|\Z)",
                      re.S)
_MINIMAX = re.compile(r"<invoke name=\"([^\"\n]{1,200})\">(.*?)(?:</invoke>|\Z)", re.S)
_MINIMAX_PARAM = re.compile(r"<parameter name=\"([^\"\n]{1,200})\">(.*?)"
                            r"(?:</parameter>|(?=<parameter )|\Z)", re.S)


def _hermes(text: str) -> list[Call]:
    out = []
    for m in _HERMES.finditer(text):
        doc = _loads(m.group(1).strip())
        if isinstance(doc, dict):
            name = doc.get("name")
            args = doc.get("arguments", doc.get("parameters", {}))
            out.append(Call(str(name or ""), args if isinstance(args, dict | str) else {},
                            m.start(), m.end()))
        else:
            out.append(Call("", m.group(1), m.start(), m.end()))  # JSON that does not parse
    return out


def _xml(text: str) -> list[Call]:
    return [Call(m.group(1).strip(), _params(_XML_PARAM, m.group(2)), m.start(), m.end())
            for m in _XML_FUNCTION.finditer(text)]


def _glm45(text: str) -> list[Call]:
    return [Call(m.group(1).strip(), _params(_GLM_ARG, m.group(2)), m.start(), m.end())
            for m in _GLM.finditer(text)]


def _minimax(text: str) -> list[Call]:
    return [Call(m.group(1).strip(), _params(_MINIMAX_PARAM, m.group(2)), m.start(), m.end())
            for m in _MINIMAX.finditer(text)]


# --------------------------------------------------------------------------- token syntaxes

_KIMI = re.compile(r"<\|tool_call_begin\|>\s*+(?:functions\.)?([^\s<:]{1,200})(?::\d+)?\s*+"
                   r"<\|tool_call_argument_begin\|>(.*?)(?:<\|tool_call_end\|>|\Z)", re.S)
_DEEPSEEK = re.compile(r"<｜tool▁call▁begin｜>(?:function<｜tool▁sep｜>([^\n<]{1,200})\n"
                       r"```(?:json)?\n(.*?)(?:\n```|\Z)|([^<｜\n]{1,200})<｜tool▁sep｜>(.*?))"
                       r"(?:<｜tool▁call▁end｜>|\Z)", re.S)


def _kimi(text: str) -> list[Call]:
    return [Call(m.group(1).strip(), _loads(m.group(2).strip()), m.start(), m.end())
            for m in _KIMI.finditer(text)]


def _deepseek(text: str) -> list[Call]:
    out = []
    for m in _DEEPSEEK.finditer(text):
        name, body = (m.group(1), m.group(2)) if m.group(1) is not None else (m.group(3),
                                                                             m.group(4))
        out.append(Call(name.strip(), _loads(body.strip()), m.start(), m.end()))
    return out


_MISTRAL = re.compile(r"\[TOOL_CALLS\]\s*+(?:([A-Za-z0-9_.\-]{1,200})\[ARGS\]|(?=\[))")


def _mistral(text: str) -> list[Call]:
    out = []
    decoder = json.JSONDecoder(strict=False)
    for m in list(_MISTRAL.finditer(text))[-MAX_ANCHORS:]:
        try:
            value, end = decoder.raw_decode(text, m.end())
        except (ValueError, RecursionError):
            continue
        if m.group(1):
            args = value if isinstance(value, dict) else text[m.end():end]
            out.append(Call(m.group(1), args, m.start(), end))
        elif isinstance(value, list):
            out.extend(_json_call(item, m.start(), end) for item in value
                       if isinstance(item, dict))
    return out


# --------------------------------------------------------------------------- JSON and Python

_JSON_ANCHOR = re.compile(r"[\[{]\s*+\{?\s*+\"(?:name|function|tool_name)\"\s*+:")


def _json_call(doc: dict, start: int, end: int) -> Call:
    inner = doc.get("function") if isinstance(doc.get("function"), dict) else doc
    name = inner.get("name") or doc.get("tool_name") or ""
    args = inner.get("arguments", inner.get("parameters", inner.get("input", {})))
    return Call(str(name), args if isinstance(args, dict | str) else {}, start, end)


def _json(text: str) -> list[Call]:
    """JSON objects (or lists of them) that are calls, wherever they start."""
    out, decoder, after = [], json.JSONDecoder(strict=False), -1
    for m in list(_JSON_ANCHOR.finditer(text))[-MAX_ANCHORS:]:
        if m.start() < after:
            continue  # inside the call just read
        try:
            value, end = decoder.raw_decode(text, m.start())
        except (ValueError, RecursionError):
            continue
        items = value if isinstance(value, list) else [value]
        calls = [_json_call(v, m.start(), end) for v in items if isinstance(v, dict)
                 and ("name" in v or isinstance(v.get("function"), dict) or "tool_name" in v)]
        out.extend(calls)
        after = end if calls else after
    return out


_PY_ANCHOR = re.compile(r"(?:^|<\|python_start\|>)[ \t]*+\[[ \t]*+[A-Za-z_][A-Za-z0-9_.]*+\(",
                        re.M)
#: Where a call list may end: a ``]`` closing its line (special tokens may follow).
_PY_END = re.compile(r"\][ \t]*+(?:<\|[A-Za-z0-9_]{1,30}\|>[ \t]*+)*+(?=\r?\n|\Z)")


def _pythonic(text: str) -> list[Call]:
    """Python lists of calls: each anchor's list is parsed up to the nearest line-ending
    ``]`` that makes it a list (at most :data:`PYTHON_ENDS` tried), within a budget of
    :data:`PYTHON_BUDGET` times the text's length."""
    out, budget, after = [], PYTHON_BUDGET * len(text), -1
    for m in list(_PY_ANCHOR.finditer(text))[-MAX_ANCHORS:]:
        start = text.index("[", m.start())
        if start < after:
            continue
        for end_match in _first(_PY_END.finditer(text, start), PYTHON_ENDS):
            end = end_match.start() + 1
            budget -= end - start
            if budget < 0:
                return out
            calls = _call_list(text[start:end])
            if calls is not None:
                out.extend(Call(name, args, start, end) for name, args in calls)
                after = end
                break
    return out


def _first(matches, n: int) -> list:
    out = []
    for m in matches:
        out.append(m)
        if len(out) == n:
            break
    return out


def _call_list(source: str) -> list[tuple[str, dict]] | None:
    """The calls of a Python list of literal-argument calls, or None when ``source`` is
    not one."""
    try:
        tree = parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Expr) or \
            not isinstance(tree.body[0].value, ast.List):
        return None
    calls = [_literal_call(node) for node in tree.body[0].value.elts]
    return [c for c in calls if c is not None] or None


def _literal_call(node: ast.AST) -> tuple[str, dict] | None:
    if not isinstance(node, ast.Call) or node.args:
        return None
    name = ast.unparse(node.func)
    args = {}
    for kw in node.keywords:
        if kw.arg is None:
            return None
        try:
            args[kw.arg] = ast.literal_eval(kw.value)  # noqa: TID251 - a node: nothing parsed
        except (ValueError, SyntaxError, RecursionError):
            return None
    return name, args


_READERS = {"hermes": _hermes, "xml": _xml, "glm45": _glm45, "kimi_k2": _kimi,
            "deepseek": _deepseek, "mistral": _mistral, "minimax": _minimax,
            "pythonic": _pythonic, "json": _json}
