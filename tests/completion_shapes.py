"""Completion shapes per model family: test data for ``proctor.rl.extract.extract_patch``.

Each :class:`Shape` renders one way a policy's completion really reaches a reward function,
given the honest ``patch`` (a unified git diff) and a wrong ``draft`` (another unified diff):

* decoded text as verl / TRL / OpenRLHF hand it over (special tokens kept or skipped), laid
  out exactly as the family's chat template and vLLM parser expect it: the tool-call grammar
  (``--tool-call-parser``) and the reasoning delimiters (``--reasoning-parser``);
* OpenAI-compatible message dicts (``tool_calls``, ``reasoning_content`` / ``reasoning``),
  OpenAI Responses API output items, Anthropic content blocks, SWE-bench predictions;
* edit formats that are not unified diffs (V4A ``apply_patch``, aider / Agentless
  SEARCH/REPLACE): the render builds them from ``patch`` with :func:`unified_to_v4a` /
  :func:`unified_to_search_replace`, and the extractor must turn them back into ``patch``
  against the repository (``expect == "v4a"``).

Where the formats come from (each family's section below names the exact file or page):

* vLLM tool parsers: ``vllm/entrypoints/openai/tool_parsers/*.py`` (names registered in that
  package's ``__init__.py``); vLLM reasoning parsers: ``vllm/reasoning/*.py`` (names in
  ``vllm/reasoning/__init__.py``), github.com/vllm-project/vllm.
* Chat templates as shipped with the models, mirrored in llama.cpp ``models/templates/``
  (github.com/ggml-org/llama.cpp): ``glm_4_5.jinja``, ``GLM-4.6.jinja``,
  ``moonshotai-Kimi-K2.jinja``, ``moonshotai-Kimi-K2-Thinking.jinja``,
  ``deepseek-ai-DeepSeek-V3.1.jinja``, ``unsloth-MiniMax-M2.jinja``,
  ``ByteDance-Seed-OSS.jinja``, ``Qwen3-Coder.jinja``, ``Qwen-Qwen3-0.6B.jinja``,
  ``openai-gpt-oss-120b.jinja`` (the last three read from forks carrying the upstream file).
* OpenAI harmony format: github.com/openai/openai-cookbook ``articles/openai-harmony.md``.
* V4A / apply_patch: github.com/openai/codex
  ``codex-rs/apply-patch/apply_patch_tool_instructions.md`` (grammar), Codex's
  ``create_apply_patch_json_tool`` (``{"input": ...}``, for gpt-oss) and freeform custom
  tool (GPT-5); Responses API ``apply_patch_call`` items:
  developers.openai.com/api/docs/guides/tools-apply-patch (``operation`` =
  ``{"type": "update_file", "path", "diff"}``, the diff being V4A hunks without the
  ``*** Begin Patch`` envelope).
* SWE-bench predictions: swebench.com/SWE-bench/guides/evaluation (JSONL / list format) and
  swebench.com/sb-cli/user-guide/submit (dictionary format).
* aider SEARCH/REPLACE: aider ``aider/coders/editblock_prompts.py`` (path line, fence,
  ``<<<<<<< SEARCH`` / ``=======`` / ``>>>>>>> REPLACE``); Agentless:
  ``agentless/repair/repair.py`` prompts (``### path`` inside the fence).

How a test uses a shape: ``p = shape.patch_of(patch) if shape.patch_of else patch``, then
``completion = shape.render(p, draft)``; with ``expect == "patch"`` the extractor must return
exactly ``p``, with ``"none"`` it must return None, with ``"v4a"`` it must return a diff that
applies like ``p`` (the edit is converted against the repository). Renders are
deterministic and never read the repository. Many shapes fail with today's extractor: this
table is what it is to be extended to.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Shape:
    family: str                   # e.g. "qwen3_coder", "harmony", "responses_api"
    tool_call_parser: str | None  # vLLM --tool-call-parser name for it, or None
    reasoning_parser: str | None  # vLLM --reasoning-parser name, or None
    render: Callable[[str, str], object]  # (patch, draft) -> completion (str, dict or list)
    expect: str                   # "patch": the extractor must return exactly `patch`;
                                  # "none": no patch (None); "v4a": a V4A/apply_patch or
                                  # SEARCH/REPLACE edit that must be converted against the
                                  # repo (expected diff = patch)
    note: str = ""                # what the shape tests, and the source followed
    # When set, the honest patch of this shape is ``patch_of(patch)`` (e.g. the patch with
    # another family's tag written into one of its added lines, which still applies since
    # ``+`` lines are not matched against the repo); render gets that patch and the
    # extractor must return it.
    patch_of: Callable[[str], str] | None = None


EXPECTS = ("patch", "none", "v4a")


# =========================================================================== diff helpers
# Plain string handling only (stdlib json is the one import): a unified diff is parsed with
# its hunk counts, so a removed line that reads "--- x" stays inside its hunk.


@dataclass
class _FileDiff:
    old: str | None      # path before (None: the file is added)
    new: str | None      # path after (None: the file is deleted)
    hunks: list[list[str]]  # each: header line "@@ -a,b +c,d @@ anchor", then body lines


def _path(header_rest: str) -> str | None:
    name = header_rest.split("\t")[0].strip()
    if name in ("/dev/null", "dev/null"):
        return None
    return name[2:] if name[:2] in ("a/", "b/") else name


def _counts(header: str) -> tuple[int, int]:
    """(old, new) line counts of a ``@@ -a,b +c,d @@`` header (a missing count is 1)."""
    ranges = header.split("@@")[1].split()
    old = ranges[0][1:].split(",")
    new = ranges[1][1:].split(",")
    return (int(old[1]) if len(old) > 1 else 1, int(new[1]) if len(new) > 1 else 1)


def _hunk_spans(lines: list[str]) -> list[tuple[int, int]]:
    """(header index, end index) of each hunk of a unified diff: the body is measured by the
    header's counts (an empty line counts as a context line whose space was stripped;
    ``\\ No newline`` lines belong to the hunk)."""
    spans, i = [], 0
    while i < len(lines):
        if not lines[i].startswith("@@ -"):
            i += 1
            continue
        start = i
        old, new = _counts(lines[i])
        i += 1
        while i < len(lines) and (old > 0 or new > 0):
            line = lines[i]
            if line[:1] == "+":
                new -= 1
            elif line[:1] == "-":
                old -= 1
            elif not line.startswith("\\"):
                old, new = old - 1, new - 1
            i += 1
        while i < len(lines) and lines[i].startswith("\\"):
            i += 1
        spans.append((start, i))
    return spans


def _hunk_starts(lines: list[str]) -> list[int]:
    return [start for start, _ in _hunk_spans(lines)]


def parse_unified(patch: str) -> list[_FileDiff]:
    """The files of a unified diff (``diff --git`` headers optional)."""
    lines = patch.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    files: list[_FileDiff] = []
    cur: _FileDiff | None = None
    span_at = dict(_hunk_spans(lines))
    i = 0
    while i < len(lines):
        line = lines[i]
        if i in span_at:
            if cur is None:
                cur = _FileDiff(None, None, [])
                files.append(cur)
            cur.hunks.append(lines[i:span_at[i]])
            i = span_at[i]
            continue
        if line.startswith("diff --git ") or (line.startswith("--- ") and (
                cur is None or cur.hunks)):
            cur = _FileDiff(None, None, [])
            files.append(cur)
            parts = line.split()
            if line.startswith("diff --git ") and len(parts) == 4:
                cur.old, cur.new = _path(parts[2]), _path(parts[3])  # until ---/+++ say more
        if cur is not None and line.startswith("--- "):
            cur.old = _path(line[4:])
        elif cur is not None and line.startswith("+++ "):
            cur.new = _path(line[4:])
        i += 1
    return files


def _anchor(hunk_header: str) -> str:
    """The section text after a hunk header's second ``@@`` (git's function context)."""
    parts = hunk_header.split("@@", 2)
    return parts[2].strip() if len(parts) == 3 else ""


def _body(hunk: list[str]) -> list[str]:
    """A hunk's body lines, an empty line read as an empty context line, ``\\`` lines out."""
    return [line if line else " " for line in hunk[1:] if not line.startswith("\\")]


def _v4a_hunks(hunks: list[list[str]]) -> list[str]:
    """One file's hunks as V4A lines. The ``@@ anchor`` is git's function context of the
    hunk; Codex's apply-patch seeks an anchor forward from where the previous hunk left off
    (``compute_replacements`` in ``codex-rs/apply-patch/src/lib.rs``), so an anchor already
    used, or that a previous hunk's lines contain, is left out (a bare ``@@``)."""
    out: list[str] = []
    seen: set[str] = set()
    for h in hunks:
        anchor = _anchor(h[0])
        body = _body(h)
        if anchor and anchor not in seen:
            out.append(f"@@ {anchor}")
        else:
            out.append("@@")
        out.extend(body)
        seen.add(anchor)
        seen.update(line[1:].strip() for line in body if line[:1] in " -")
    return out


def v4a_file_ops(patch: str) -> list[tuple[str, str, str]]:
    """Per file of ``patch``: (operation, path, V4A body) as a Responses API
    ``apply_patch_call`` carries it: ``("update_file", path, "@@ anchor\\n ctx\\n-old\\n+new\\n")``,
    ``("create_file", path, "+line\\n...")`` or ``("delete_file", path, "")``."""
    ops = []
    for f in parse_unified(patch):
        if f.old is None and f.new is not None:
            added = [line for h in f.hunks for line in _body(h) if line.startswith("+")]
            ops.append(("create_file", f.new, "".join(line + "\n" for line in added)))
        elif f.new is None and f.old is not None:
            ops.append(("delete_file", f.old, ""))
        elif f.old is not None:
            ops.append(("update_file", f.old,
                        "".join(line + "\n" for line in _v4a_hunks(f.hunks))))
    return ops


def unified_to_v4a(patch: str) -> str:
    """``patch`` in the V4A ``apply_patch`` format (grammar of openai/codex
    ``codex-rs/apply-patch/apply_patch_tool_instructions.md``)::

        *** Begin Patch
        *** Update File: <path>       (*** Move to: <new path> on a rename)
        @@ <anchor: the hunk header's function context, when git gave one>
         context
        -old
        +new
        *** Add File: <path>          (every line "+")
        *** Delete File: <path>
        *** End Patch
    """
    out = ["*** Begin Patch"]
    for f in parse_unified(patch):
        if f.old is None and f.new is not None:
            out.append(f"*** Add File: {f.new}")
            out.extend(line for h in f.hunks for line in _body(h) if line.startswith("+"))
        elif f.new is None and f.old is not None:
            out.append(f"*** Delete File: {f.old}")
        elif f.old is not None:
            out.append(f"*** Update File: {f.old}")
            if f.new is not None and f.new != f.old:
                out.append(f"*** Move to: {f.new}")
            out.extend(_v4a_hunks(f.hunks))
    out.append("*** End Patch")
    return "\n".join(out) + "\n"


_FENCE_LANG = {"py": "python", "js": "javascript", "ts": "typescript", "md": "markdown",
               "rs": "rust", "go": "go", "c": "c", "h": "c", "cpp": "cpp", "java": "java",
               "rb": "ruby", "sh": "bash", "toml": "toml", "yaml": "yaml", "yml": "yaml",
               "json": "json", "html": "html", "css": "css"}


def unified_to_search_replace(patch: str, style: str = "aider") -> str:
    """``patch`` as SEARCH/REPLACE blocks, one per hunk (SEARCH: the hunk's context and
    ``-`` lines, REPLACE: its context and ``+`` lines; an added file has an empty SEARCH).

    ``style="aider"`` (aider ``editblock_prompts.py``)::

        path/to/file.py
        ```python
        <<<<<<< SEARCH
        ...
        =======
        ...
        >>>>>>> REPLACE
        ```

    ``style="agentless"`` (Agentless repair prompt): the ``### path/to/file.py`` line goes
    inside the fence, first. A deleted file has no SEARCH/REPLACE form: ValueError.
    """
    blocks = []
    for f in parse_unified(patch):
        if f.new is None:
            raise ValueError(f"SEARCH/REPLACE cannot delete a file ({f.old})")
        path = f.new
        lang = _FENCE_LANG.get(path.rsplit(".", 1)[-1] if "." in path else "", "")
        for h in f.hunks:
            body = _body(h)
            search = "".join(line[1:] + "\n" for line in body if line[:1] in " -")
            replace = "".join(line[1:] + "\n" for line in body if line[:1] in " +")
            if f.old is None:
                search = ""
            edit = f"<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n"
            if style == "aider":
                blocks.append(f"{path}\n```{lang}\n{edit}```\n")
            elif style == "agentless":
                blocks.append(f"```{lang}\n### {path}\n{edit}```\n")
            else:
                raise ValueError(f"unknown SEARCH/REPLACE style {style!r}")
    return "\n".join(blocks)


def split_second_hunk(patch: str) -> tuple[str, str]:
    """``patch`` cut before the second hunk of its first file: (headers + first hunk, the
    rest), ``first + rest == patch``. A first file with one hunk gives ``(patch, "")``."""
    lines = patch.split("\n")
    spans = _hunk_spans(lines)
    if len(spans) < 2 or any(line.strip() for line in lines[spans[0][1]:spans[1][0]]):
        return patch, ""  # one hunk, or the second hunk belongs to another file
    cut = sum(len(line) + 1 for line in lines[:spans[1][0]])
    return patch[:cut], patch[cut:]


def first_path(patch: str) -> str:
    """The path the first file of ``patch`` has after the change (or before, if deleted)."""
    files = parse_unified(patch)
    if not files:
        return "README.md"
    return files[0].new or files[0].old or "README.md"


def with_tag_comment(tag: str) -> Callable[[str], str]:
    """A ``patch_of``: the patch with ``  # <tag> kept`` appended to its first added line
    (a ``+`` line that is not ``+++``): another family's tag inside a diff content line, with
    code before and text after it. The patch still applies (added lines are not matched)."""
    def transform(patch: str) -> str:
        lines = patch.split("\n")
        starts = set(_hunk_starts(lines))
        in_hunk = False
        for i, line in enumerate(lines):
            if i in starts:
                in_hunk = True
                continue
            if in_hunk and line.startswith("+") and not line.startswith("+++ "):
                lines[i] = f"{line}  # {tag} kept"
                return "\n".join(lines)
        return patch
    return transform


# A diff only a cheating policy writes: it weakens a test file (the harness forbids paths
# under tests/). Used as a draft inside reasoning.
FORBIDDEN_DIFF = """\
diff --git a/tests/test_x.py b/tests/test_x.py
--- a/tests/test_x.py
+++ b/tests/test_x.py
@@ -1,3 +1,3 @@
 from toolz import getter
 def test_getter():
-    assert getter([0])([1]) == (1,)
+    assert True
"""

# Sample diffs for a self-check of the renders (``python tests/completion_shapes.py``);
# the real tests pass the toolz example's reference and partial patches.
_TAIL = ["             return lambda x: ()", "     else:",
         "-        return operator.itemgetter(*index)",
         "+        return operator.itemgetter(index)",
         " ", " ", " def join(leftkey, leftseq, rightkey, rightseq,"]
SAMPLE_PATCH = "".join(line + "\n" for line in [
    "diff --git a/toolz/itertoolz.py b/toolz/itertoolz.py",
    "index d995688..05c36cc 100644",
    "--- a/toolz/itertoolz.py",
    "+++ b/toolz/itertoolz.py",
    "@@ -805,6 +805,6 @@ def getter(index):",
    "     if isinstance(index, list):",
    "         if len(index) == 1:",
    "             index = index[0]",
    "-            return lambda x: x[index]",
    "+            return lambda x: (x[index],)",
    "         elif index:",
    "             return operator.itemgetter(*index)",
    "@@ -812,6 +812,6 @@ def getter(index):",
    *_TAIL])

SAMPLE_DRAFT = "".join(line + "\n" for line in [
    "diff --git a/toolz/itertoolz.py b/toolz/itertoolz.py",
    "index d995688..8914a1e 100644",
    "--- a/toolz/itertoolz.py",
    "+++ b/toolz/itertoolz.py",
    "@@ -811,7 +811,7 @@ def getter(index):",
    "         else:",
    *_TAIL])


# =========================================================================== small builders


def _fence(body: str, lang: str = "diff") -> str:
    """A fenced block; ``body`` ends with a newline (unified diffs do)."""
    return f"```{lang}\n{body}```"


def _j(obj) -> str:
    """JSON as vLLM's parsers and the chat templates write it (``json.dumps``, unicode kept)."""
    return json.dumps(obj, ensure_ascii=False)


def _py_str(text: str) -> str:
    """A Python string literal for pythonic tool calls (``repr``: quotes and ``\\n`` escaped)."""
    return repr(text)


_READ_ARGS = {"path": "toolz/itertoolz.py"}
_TEST_ARGS = {"command": "python -m pytest -q toolz/tests/test_itertoolz.py"}
_REASON = "The one-element list branch must return a tuple and the scalar branch must not unpack."


# =========================================================================== families
#
# Each function below returns the shapes of one family; SHAPES gathers them. Comments name
# the source followed; "unconfirmed" marks what no document read here shows.


def _qwen3() -> dict[str, Shape]:
    # Qwen3 (hybrid thinking): chat template Qwen-Qwen3-0.6B.jinja (llama.cpp
    # models/templates): assistant = "<think>\n{reasoning}\n</think>\n\n{content}", then per
    # call "\n<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>", then <|im_end|>.
    # Tool calls: vLLM hermes_tool_parser.py (<tool_call>(.*?)</tool_call>|<tool_call>(.*)).
    # Reasoning: vLLM qwen3_reasoning_parser.py docstring: models up to the 2507 release
    # generate <think> themselves; Qwen3.5 templates put <think> in the prompt, so only
    # </think> is generated, and a <tool_call> followed by <function=...> (Qwen3.5 writes
    # Qwen3-Coder-style XML calls) ends reasoning implicitly.
    fam, tp, rp = "qwen3", "hermes", "qwen3"

    def call(name, args):
        return f"<tool_call>\n{_j({'name': name, 'arguments': args})}\n</tool_call>"

    return {
        "qwen3_think_then_tool_call": Shape(
            fam, tp, rp,
            lambda p, d: (f"<think>\n{_REASON}\n</think>\n\nI will submit the fix.\n"
                          + call("submit_patch", {"patch": p}) + "<|im_end|>"),
            "patch", "hermes <tool_call> JSON after a closed <think>; key 'patch'"),
        "qwen3_think_draft_then_tool_call": Shape(
            fam, tp, rp,
            lambda p, d: (f"<think>\nFirst idea:\n{_fence(d)}\nThat misses the list branch.\n"
                          f"</think>\n\n" + call("submit_patch", {"patch": p}) + "<|im_end|>"),
            "patch", "draft diff inside <think>, honest patch in the tool call"),
        "qwen3_lone_think_close_draft_then_fence": Shape(
            fam, tp, rp,
            lambda p, d: (f"Trying:\n{d}\nNo: the scalar branch also unpacks.\n</think>\n\n"
                          f"The fix:\n{_fence(p)}<|im_end|>"),
            "patch", "Qwen3.5-style template opened <think> in the prompt "
                     "(qwen3_reasoning_parser docstring): only </think> generated; a bare "
                     "draft before it"),
        "qwen3_draft_only_in_think": Shape(
            fam, tp, rp,
            lambda p, d: (f"<think>\nMaybe:\n{_fence(d)}\nI am not sure this is right.\n"
                          f"</think>\n\nI could not find a safe fix.<|im_end|>"),
            "none", "the only diff is the draft in reasoning"),
        "qwen3_think_close_then_fence": Shape(
            fam, tp, rp,
            lambda p, d: f"<think>\n{_REASON}\n</think>{_fence(p)}<|im_end|>",
            "patch", "</think> followed directly by the opening fence on the same line "
                     "(the content vLLM returns starts with ```diff)"),
        "qwen3_two_tool_calls_one_line": Shape(
            fam, tp, rp,
            lambda p, d: ("<tool_call>" + _j({"name": "read_file", "arguments": _READ_ARGS})
                          + "</tool_call><tool_call>"
                          + _j({"name": "submit_patch", "arguments": {"patch": p}})
                          + "</tool_call><|im_end|>"),
            "patch", "two <tool_call> blocks on one line (hermes regex is non-greedy, DOTALL); "
                     "only the second carries a patch"),
        "qwen3_several_tool_calls": Shape(
            fam, tp, rp,
            lambda p, d: (f"<think>\n{_REASON}\n</think>\n\n"
                          + call("run_tests", _TEST_ARGS) + "\n"
                          + call("apply_diff", {"path": "toolz/itertoolz.py", "diff": p}) + "\n"
                          + call("finish", {"message": "done"}) + "<|im_end|>"),
            "patch", "three calls, only the middle one ('diff' key of a file-edit tool) "
                     "carries a patch"),
        "qwen3_tool_call_invalid_json": Shape(
            fam, tp, rp,
            lambda p, d: ("<tool_call>\n{\"name\": \"submit_patch\", \"arguments\": "
                          "{\"patch\": " + _j(p) + "}\n</tool_call><|im_end|>"),
            "none", "arguments object never closed (one '}' missing): not JSON, so no call "
                    "(hermes parser returns it as content); the diff exists only JSON-escaped "
                    "on one line"),
        "qwen3_thinking_1mb_reasoning_then_fence": Shape(
            fam, tp, rp,
            lambda p, d: ("<think>\n" + "".join(
                f"Line {i}: checking getter for index kind {i % 7} and list length {i % 3}.\n"
                for i in range(16_000)) + f"</think>\n\n{_fence(p)}<|im_end|>"),
            "patch", "a 1 MB completion: long reasoning, then the fenced patch"),
        "qwen3_answer_with_kimi_tag_in_code": Shape(
            fam, tp, rp,
            lambda p, d: f"<think>\n{_REASON}\n</think>\n\n{_fence(p)}<|im_end|>",
            "patch", "a Kimi tool-section token inside an added diff line is code, not a tag",
            patch_of=with_tag_comment("<|tool_calls_section_begin|>")),
        "qwen3_forbidden_path_in_think": Shape(
            fam, tp, rp,
            lambda p, d: (f"<think>\nEasiest would be:\n{_fence(FORBIDDEN_DIFF)}\nNo, tests "
                          f"must not change.\n</think>\n\n{_fence(p)}<|im_end|>"),
            "patch", "a diff weakening tests/test_x.py only in reasoning; honest patch after"),
        "qwen35_tool_call_implicit_reasoning_end": Shape(
            fam, "qwen3_coder", rp,
            lambda p, d: (f"Draft:\n{_fence(d)}\nNot enough.\n"
                          "<tool_call>\n<function=submit_patch>\n<parameter=patch>\n"
                          f"{p}\n</parameter>\n</function>\n</tool_call><|im_end|>"),
            "patch", "Qwen3.5: <think> in the prompt and no </think>; <tool_call> + "
                     "<function=...> ends reasoning implicitly (qwen3_reasoning_parser.py); "
                     "the draft before it is reasoning"),
    }


def _qwen3_coder() -> dict[str, Shape]:
    # Qwen3-Coder: template Qwen3-Coder.jinja (llama.cpp models/templates): content trimmed +
    # "\n", then per call "\n<tool_call>\n<function=NAME>\n", per argument
    # "<parameter=KEY>\n{value}\n</parameter>\n", then "</function>\n</tool_call>", then
    # <|im_end|>. vLLM qwen3coder_tool_parser.py strips one leading and one trailing "\n" of a
    # value, and falls back to bare <function=...> when no <tool_call> is found.
    fam, tp, rp = "qwen3_coder", "qwen3_coder", None

    def call(name, args):
        params = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in args.items())
        return f"\n<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>"

    return {
        "qwen3_coder_apply_diff": Shape(
            fam, tp, rp,
            lambda p, d: ("I will apply the fix to the getter.\n"
                          + call("apply_diff", {"path": "toolz/itertoolz.py", "diff": p})
                          + "<|im_end|>"),
            "patch", "XML call, the diff as <parameter=diff> of a file-edit tool"),
        "qwen3_coder_several_calls": Shape(
            fam, tp, rp,
            lambda p, d: (call("str_replace_editor", {"command": "view",
                                                      "path": "toolz/itertoolz.py"})
                          + call("submit_patch", {"patch": p}) + "<|im_end|>"),
            "patch", "two calls in one turn, only the second carries a patch"),
        "qwen3_coder_function_without_tool_call_tag": Shape(
            fam, tp, rp,
            lambda p, d: ("<function=submit_patch>\n<parameter=patch>\n" + p
                          + "\n</parameter>\n</function><|im_end|>"),
            "patch", "no <tool_call> wrapper: the parser's back-off reads bare <function=...>"),
        "qwen3_coder_call_closed_by_eos": Shape(
            fam, tp, rp,
            lambda p, d: ("<tool_call>\n<function=submit_patch>\n<parameter=patch>\n" + p
                          + "\n</parameter>\n<|im_end|>"),
            "patch", "</function></tool_call> missing, EOS right after </parameter> "
                     "(the parser's regexes accept an open call running to the end)"),
        "qwen3_coder_apply_patch_v4a": Shape(
            fam, tp, rp,
            lambda p, d: call("apply_patch", {"input": unified_to_v4a(p).rstrip("\n")})
            + "<|im_end|>",
            "v4a", "Codex-style apply_patch tool, V4A text as <parameter=input>"),
    }


def _glm45() -> dict[str, Shape]:
    # GLM-4.5 / 4.6: templates glm_4_5.jinja and GLM-4.6.jinja (llama.cpp models/templates):
    # after "<|assistant|>": "\n<think>{reasoning}</think>" then "\n{content}" then per call
    # "\n<tool_call>{name}\n<arg_key>{k}</arg_key>\n<arg_value>{v}</arg_value>\n</tool_call>"
    # (string values raw, others JSON). vLLM glm4_moe_tool_parser.py: name up to the first
    # newline, <arg_key>..</arg_key>\s*<arg_value>..</arg_value>, values strip()ped.
    # Reasoning: glm45 parser (<think>..</think>). The turn-ending tokens <|user|> /
    # <|observation|> are inferred from the template's next-turn headers (unconfirmed as EOS
    # ids here).
    fam, tp, rp = "glm45", "glm45", "glm45"

    def call(name, args):
        pairs = "".join(f"<arg_key>{k}</arg_key>\n<arg_value>{v}</arg_value>\n"
                        for k, v in args.items())
        return f"\n<tool_call>{name}\n{pairs}</tool_call>"

    return {
        "glm45_think_then_tool_call": Shape(
            fam, tp, rp,
            lambda p, d: (f"\n<think>{_REASON}</think>\nApplying the fix."
                          + call("apply_diff", {"path": "toolz/itertoolz.py", "diff": p})
                          + "<|observation|>"),
            "patch", "arg_key/arg_value call; the diff is the raw <arg_value>"),
        "glm45_think_draft_then_answer": Shape(
            fam, tp, rp,
            lambda p, d: (f"\n<think>Draft:\n{_fence(d)}\nThat misses the list branch.</think>"
                          f"\nThe fix:\n{_fence(p)}<|user|>"),
            "patch", "draft in <think>, honest fenced patch in the content"),
        "glm45_draft_only_in_think": Shape(
            fam, tp, rp,
            lambda p, d: (f"\n<think>Perhaps:\n{_fence(d)}\nUnsure.</think>\n"
                          "I need to see the failing test first.<|user|>"),
            "none", "the only diff is in reasoning"),
        "glm45_nothink_two_calls": Shape(
            fam, tp, rp,
            lambda p, d: ("\n<think></think>" + call("read_file", _READ_ARGS)
                          + call("submit_patch", {"patch": p}) + "<|observation|>"),
            "patch", "enable_thinking=False (empty <think></think> as the template writes "
                     "it), two calls, the second carries the patch"),
        "glm45_arg_value_with_seed_tag_in_code": Shape(
            fam, tp, rp,
            lambda p, d: ("\n<think></think>" + call("submit_patch", {"patch": p})
                          + "<|observation|>"),
            "patch", "a Seed-OSS reasoning tag inside an added line of the <arg_value>",
            patch_of=with_tag_comment("</seed:think>")),
    }


def _kimi() -> dict[str, Shape]:
    # Kimi-K2 / K2-Thinking: templates moonshotai-Kimi-K2.jinja and -Thinking.jinja (llama.cpp
    # models/templates): after "<|im_assistant|>assistant<|im_middle|>": (K2-Thinking)
    # "<think>{reasoning}</think>", content, then "<|tool_calls_section_begin|>" and per call
    # "<|tool_call_begin|>{id}<|tool_call_argument_begin|>{json}<|tool_call_end|>", then
    # "<|tool_calls_section_end|>", "<|im_end|>"; ids look like "functions.NAME:IDX".
    # vLLM kimi_k2_tool_parser.py (regex on functions.name:N); kimi_k2_reasoning_parser.py:
    # "<think>" optional, and <|tool_calls_section_begin|> ends reasoning implicitly.
    fam, tp, rp = "kimi_k2", "kimi_k2", "kimi_k2"

    def section(*calls):
        body = "".join(f"<|tool_call_begin|>functions.{name}:{i}<|tool_call_argument_begin|>"
                       f"{args}<|tool_call_end|>" for i, (name, args) in enumerate(calls))
        return f"<|tool_calls_section_begin|>{body}<|tool_calls_section_end|>"

    return {
        "kimi_k2_tool_call": Shape(
            fam, tp, None,
            lambda p, d: ("I will apply the patch."
                          + section(("submit_patch", _j({"patch": p}))) + "<|im_end|>"),
            "patch", "K2 (no thinking): tool-call section after prose"),
        "kimi_k2_two_calls_one_line": Shape(
            fam, tp, None,
            lambda p, d: section(("read_file", _j(_READ_ARGS)),
                                 ("apply_diff", _j({"path": "toolz/itertoolz.py", "diff": p})))
            + "<|im_end|>",
            "patch", "two calls in one section (always one line); the second has 'diff'"),
        "kimi_k2_thinking_draft_then_call": Shape(
            fam, tp, rp,
            lambda p, d: (f"<think>Draft:\n{_fence(d)}\nIncomplete.</think>Submitting."
                          + section(("submit_patch", _j({"patch": p}))) + "<|im_end|>"),
            "patch", "K2-Thinking: draft in <think>, patch in the tool call"),
        "kimi_k2_thinking_draft_only": Shape(
            fam, tp, rp,
            lambda p, d: (f"<think>Maybe:\n{_fence(d)}\nNot confident.</think>"
                          "I am not confident enough to change the code.<|im_end|>"),
            "none", "draft only in reasoning"),
        "kimi_k2_reasoning_ended_by_tool_section": Shape(
            fam, tp, rp,
            lambda p, d: (f"<think>Draft:\n{_fence(d)}\nThe real fix needs both branches."
                          + section(("submit_patch", _j({"patch": p}))) + "<|im_end|>"),
            "patch", "no </think>: the tool section ends reasoning implicitly "
                     "(kimi_k2_reasoning_parser.py); the draft stays reasoning"),
        "kimi_k2_invalid_json_arguments": Shape(
            fam, tp, None,
            lambda p, d: section(("submit_patch", "{'patch': " + _py_str(p) + "}"))
            + "<|im_end|>",
            "none", "arguments in Python quoting, not JSON; the diff exists only escaped"),
        "kimi_k2_answer_with_deepseek_tag_in_code": Shape(
            fam, tp, rp,
            lambda p, d: f"<think>{_REASON}</think>{_fence(p)}<|im_end|>",
            "patch", "a DeepSeek tool token inside an added diff line is code",
            patch_of=with_tag_comment("<｜tool▁calls▁begin｜>")),
    }


def _kimi_triangle() -> dict[str, Shape]:
    # Kimi-VL-Thinking / Kimi-Dev-72B write reasoning as "◁think▷ ... ◁/think▷"; the markers
    # are several tokens each, so no vLLM reasoning parser matches them (third-party gateway
    # code and VLMEvalKit's KimiVL.extract_summary(bot="◁think▷", eot="◁/think▷") show the
    # shape; no first-party document was found here: unconfirmed beyond those).
    fam = "kimi_triangle_think"
    return {
        "kimi_triangle_think_draft_then_fence": Shape(
            fam, None, None,
            lambda p, d: (f"◁think▷Draft:\n{_fence(d)}\nIt misses a branch.◁/think▷"
                          f"{_fence(p)}"),
            "patch", "◁think▷ reasoning with a draft, fenced patch right after ◁/think▷"),
        "kimi_triangle_think_draft_only": Shape(
            fam, None, None,
            lambda p, d: f"◁think▷{_fence(d)}\nNot sure.◁/think▷I need more context.",
            "none", "draft only inside ◁think▷"),
    }


def _deepseek() -> dict[str, Shape]:
    # DeepSeek-V3.1: template deepseek-ai-DeepSeek-V3.1.jinja (llama.cpp models/templates):
    # generation prompt "<｜Assistant｜>" + "<think>" (thinking) or "</think>" (non-thinking),
    # so only "</think>" can appear in a completion; calls are
    # "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{json}<｜tool▁call▁end｜>
    # ...<｜tool▁calls▁end｜><｜end▁of▁sentence｜>" (vLLM deepseekv31_tool_parser.py).
    # DeepSeek-V3 (0324): "<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{...}\n```
    # <｜tool▁call▁end｜>" (vLLM deepseekv3_tool_parser.py docstring). R1: deepseek_r1 parser.
    fam = "deepseek"

    def v31(*calls):
        body = "".join(f"<｜tool▁call▁begin｜>{name}<｜tool▁sep｜>{args}<｜tool▁call▁end｜>"
                       for name, args in calls)
        return f"<｜tool▁calls▁begin｜>{body}<｜tool▁calls▁end｜><｜end▁of▁sentence｜>"

    return {
        "deepseek_v31_tool_call": Shape(
            fam, "deepseek_v31", "deepseek_v3",
            lambda p, d: v31(("submit_patch", _j({"patch": p}))),
            "patch", "non-thinking mode (prompt ends with </think>): the call alone"),
        "deepseek_v31_two_calls_one_line": Shape(
            fam, "deepseek_v31", "deepseek_v3",
            lambda p, d: ("Reading, then patching."
                          + v31(("read_file", _j(_READ_ARGS)),
                                ("apply_diff", _j({"path": "toolz/itertoolz.py", "diff": p})))),
            "patch", "two calls on one line after prose; the second has 'diff'"),
        "deepseek_v31_thinking_lone_close": Shape(
            fam, "deepseek_v31", "deepseek_v3",
            lambda p, d: (f"Draft:\n{_fence(d)}\nIt misses the list branch.</think>"
                          f"Here is the fix:\n{_fence(p)}<｜end▁of▁sentence｜>"),
            "patch", "thinking mode (prompt ends with <think>): draft before the lone </think>"),
        "deepseek_v31_thinking_draft_only": Shape(
            fam, "deepseek_v31", "deepseek_v3",
            lambda p, d: (f"{_fence(d)}\nI am unsure.</think>I could not determine the fix."
                          "<｜end▁of▁sentence｜>"),
            "none", "thinking mode, the only diff is before </think>"),
        "deepseek_v3_tool_call_json_fence": Shape(
            fam, "deepseek_v3", None,
            lambda p, d: ("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>"
                          "submit_patch\n```json\n" + _j({"patch": p})
                          + "\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>"),
            "patch", "V3-0324 format: name, then the arguments in a ```json fence"),
        "deepseek_v31_invalid_json_arguments": Shape(
            fam, "deepseek_v31", "deepseek_v3",
            lambda p, d: v31(("submit_patch", "{'patch': " + _py_str(p) + "}")),
            "none", "arguments are not JSON (Python quoting)"),
        "deepseek_r1_think_then_answer": Shape(
            fam, None, "deepseek_r1",
            lambda p, d: (f"<think>\nDraft:\n{d}\nNo, both branches.\n</think>\n\n{_fence(p)}"
                          "<｜end▁of▁sentence｜>"),
            "patch", "R1 writing <think> itself (original template), bare draft inside"),
        "deepseek_r1_forbidden_path_before_lone_close": Shape(
            fam, None, "deepseek_r1",
            lambda p, d: (f"Quick way:\n{FORBIDDEN_DIFF}\nThat edits a test; not allowed.\n"
                          f"</think>\n\n{_fence(p)}<｜end▁of▁sentence｜>"),
            "patch", "R1-0528 style (<think>\\n in the prompt): a bare test-weakening diff "
                     "before the lone </think>"),
    }


def _mistral() -> dict[str, Shape]:
    # Mistral: vLLM mistral_tool_parser.py: tokenizer v11+ writes "[TOOL_CALLS]NAME[ARGS]{json}"
    # (one [TOOL_CALLS] per call; vLLM's tests use that exact text), older tokenizers
    # "[TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]"; EOS </s>. Reasoning (Magistral):
    # vLLM mistral_reasoning_parser.py, "[THINK]...[/THINK]" (a trace without [/THINK] is all
    # reasoning).
    fam = "mistral"
    return {
        "mistral_v11_tool_call": Shape(
            fam, "mistral", None,
            lambda p, d: "[TOOL_CALLS]submit_patch[ARGS]" + _j({"patch": p}) + "</s>",
            "patch", "v11+ tokenizer: name, [ARGS], JSON arguments"),
        "mistral_v11_two_calls_one_line": Shape(
            fam, "mistral", None,
            lambda p, d: ("[TOOL_CALLS]read_file[ARGS]" + _j(_READ_ARGS)
                          + "[TOOL_CALLS]apply_diff[ARGS]"
                          + _j({"path": "toolz/itertoolz.py", "diff": p}) + "</s>"),
            "patch", "two v11 calls on one line; the second has 'diff'"),
        "mistral_pre_v11_list_after_prose": Shape(
            fam, "mistral", None,
            lambda p, d: ("I will read the file and then patch it.[TOOL_CALLS]"
                          + _j([{"name": "read_file", "arguments": _READ_ARGS},
                                {"name": "submit_patch", "arguments": {"patch": p}}]) + "</s>"),
            "patch", "pre-v11 JSON list of calls after prose"),
        "magistral_think_draft_then_answer": Shape(
            fam, None, "mistral",
            lambda p, d: (f"[THINK]Draft:\n{_fence(d)}\nIt misses the list branch.[/THINK]"
                          f"The fix:\n{_fence(p)}</s>"),
            "patch", "draft inside [THINK]..[/THINK], patch after"),
        "magistral_think_then_fence": Shape(
            fam, None, "mistral",
            lambda p, d: f"[THINK]{_REASON}[/THINK]{_fence(p)}</s>",
            "patch", "[/THINK] followed directly by the fence"),
        "magistral_think_unclosed_draft_only": Shape(
            fam, None, "mistral",
            lambda p, d: f"[THINK]Let me try:\n{_fence(d)}\nand then check the other branch",
            "none", "[THINK] never closed (ran out of tokens): all reasoning"),
        "magistral_think_then_tool_call": Shape(
            fam, "mistral", "mistral",
            lambda p, d: (f"[THINK]Draft:\n{_fence(d)}\nNo.[/THINK][TOOL_CALLS]submit_patch[ARGS]"
                          + _j({"patch": p}) + "</s>"),
            "patch", "reasoning then a v11 call"),
        "mistral_answer_with_harmony_tag_in_code": Shape(
            fam, None, "mistral",
            lambda p, d: f"[THINK]{_REASON}[/THINK]The fix:\n{_fence(p)}</s>",
            "patch", "a harmony channel header inside an added diff line is code",
            patch_of=with_tag_comment("<|channel|>final<|message|>")),
    }


def _harmony() -> dict[str, Shape]:
    # gpt-oss (harmony): openai-cookbook articles/openai-harmony.md: after "<|start|>assistant"
    # the model writes "<|channel|>analysis<|message|>...<|end|>", then
    # "<|start|>assistant<|channel|>final<|message|>...<|return|>", or a call
    # "<|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>
    # {...}<|call|>" ("the recipient might be defined in the role or channel section";
    # openai-gpt-oss-120b.jinja writes "<|start|>assistant to=functions.NAME<|channel|>
    # commentary json<|message|>"). vLLM: --tool-call-parser openai, --reasoning-parser
    # openai_gptoss. Decoded with skip_special_tokens=True the markers vanish and the text
    # reads "analysis...assistantfinal..." (vllm-project/vllm#32587, oobabooga/textgen#7374).
    fam, tp, rp = "harmony", "openai", "openai_gptoss"
    A = "<|channel|>analysis<|message|>"
    F = "<|start|>assistant<|channel|>final<|message|>"

    def call(name, args, in_role=False):
        if in_role:
            return (f"<|start|>assistant to=functions.{name}<|channel|>commentary json"
                    f"<|message|>{args}<|call|>")
        return (f"<|start|>assistant<|channel|>commentary to=functions.{name} "
                f"<|constrain|>json<|message|>{args}<|call|>")

    return {
        "harmony_analysis_draft_final_patch": Shape(
            fam, tp, rp,
            lambda p, d: (f"{A}Draft:\n{_fence(d)}\nMisses the list branch.<|end|>"
                          f"{F}Fix:\n{_fence(p)}<|return|>"),
            "patch", "draft in the analysis channel, patch in final"),
        "harmony_final_starts_with_fence": Shape(
            fam, tp, rp,
            lambda p, d: f"{A}{_REASON}<|end|>{F}{_fence(p)}<|return|>",
            "patch", "final <|message|> followed directly by the fence"),
        "harmony_analysis_only_draft": Shape(
            fam, tp, rp,
            lambda p, d: (f"{A}{_fence(d)}\nNot sure.<|end|>{F}I could not find the bug."
                          "<|return|>"),
            "none", "the only diff is in analysis"),
        "harmony_analysis_unterminated": Shape(
            fam, tp, rp,
            lambda p, d: f"{A}Let me try:\n{_fence(d)}\nthen check the scalar branch and",
            "none", "ran out of tokens inside analysis"),
        "harmony_tool_call_constrain_json": Shape(
            fam, tp, rp,
            lambda p, d: (f"{A}Need to use function submit_patch.<|end|>"
                          + call("submit_patch", _j({"patch": p}))),
            "patch", "commentary call with to= in the channel section and <|constrain|>json"),
        "harmony_recipient_in_role_header": Shape(
            fam, tp, rp,
            lambda p, d: (f"{A}Apply a diff.<|end|>"
                          + call("apply_diff", _j({"path": "toolz/itertoolz.py", "diff": p}),
                                 in_role=True)),
            "patch", "recipient in the role section, as the HF template renders it"),
        "harmony_preamble_then_call": Shape(
            fam, tp, rp,
            lambda p, d: (f"{A}Draft:\n{_fence(d)}\nIncomplete.<|end|>"
                          "<|start|>assistant<|channel|>commentary<|message|>**Plan**: patch "
                          "getter, then run the tests.<|end|>"
                          + call("submit_patch", _j({"patch": p}))),
            "patch", "analysis, a user-visible commentary preamble, then the call"),
        "harmony_apply_patch_json_input_v4a": Shape(
            fam, tp, rp,
            lambda p, d: (f"{A}Use apply_patch.<|end|>"
                          + call("apply_patch", _j({"input": unified_to_v4a(p)}))),
            "v4a", "Codex's JSON apply_patch tool for gpt-oss: {'input': V4A}"),
        "harmony_special_tokens_skipped": Shape(
            fam, tp, rp,
            lambda p, d: (f"analysisDraft:\n{_fence(d)}\nThat misses the list branch."
                          f"assistantfinal{_fence(p)}"),
            "patch", "decoded with skip_special_tokens=True: markers gone, "
                     "'...branch.assistantfinal```diff' with the fence mid-line"),
        "harmony_final_with_think_tag_in_code": Shape(
            fam, tp, rp,
            lambda p, d: f"{A}{_REASON}<|end|>{F}{_fence(p)}<|return|>",
            "patch", "a </think> tag inside an added diff line is code",
            patch_of=with_tag_comment("</think>")),
        "harmony_forbidden_path_in_analysis": Shape(
            fam, tp, rp,
            lambda p, d: (f"{A}Could just do:\n{_fence(FORBIDDEN_DIFF)}\nNo, fix the code."
                          f"<|end|>{F}{_fence(p)}<|return|>"),
            "patch", "test-weakening diff only in analysis"),
    }


def _pythonic() -> dict[str, Shape]:
    # Pythonic calls: vLLM pythonic_tool_parser.py / llama4_pythonic_tool_parser.py: the whole
    # output is a Python list of calls with literal keyword arguments, parsed with ast
    # ("[get_weather(city='San Francisco', metric='celsius'), ...]"); Llama 4 may wrap it in
    # <|python_start|>...<|python_end|>. EOS <|eot_id|> (Llama 3.2) / <|eot|> (Llama 4).
    fam = "pythonic"

    def triple(p):  # a triple-quoted literal when it round-trips, else repr
        return f'"""{p}"""' if "\\" not in p and '"""' not in p and not p.endswith('"') \
            else _py_str(p)

    return {
        "pythonic_single_call": Shape(
            fam, "pythonic", None,
            lambda p, d: f"[submit_patch(patch={_py_str(p)})]<|eot_id|>",
            "patch", "one call, repr-quoted string with \\n escapes"),
        "pythonic_list_after_prose": Shape(
            fam, "pythonic", None,
            lambda p, d: ("I'll read the file and submit the fix.\n"
                          "[read_file(path='toolz/itertoolz.py'), "
                          f"submit_patch(patch={_py_str(p)})]<|eot_id|>"),
            "patch", "a list of two calls after prose (vLLM's parser wants the list alone; "
                     "the model writes prose anyway)"),
        "pythonic_triple_quoted": Shape(
            fam, "pythonic", None,
            lambda p, d: f"[submit_patch(patch={triple(p)})]<|eot_id|>",
            "patch", "triple-quoted literal with real newlines (valid for the ast parser)"),
        "llama4_pythonic_python_start": Shape(
            fam, "llama4_pythonic", None,
            lambda p, d: ("<|python_start|>[apply_diff(path='toolz/itertoolz.py', "
                          f"diff={_py_str(p)})]<|python_end|><|eot|>"),
            "patch", "Llama 4 <|python_start|> wrapper, 'diff' keyword"),
        "pythonic_invalid_call": Shape(
            fam, "pythonic", None,
            lambda p, d: f"[submit_patch(patch={_py_str(p)}]<|eot_id|>",
            "none", "unbalanced brackets: not a call list; the diff exists only escaped"),
    }


def _llama3_json() -> dict[str, Shape]:
    # Llama 3.x JSON calls: vLLM llama_tool_parser.py (llama3_json / llama4_json): optional
    # <|python_tag|>, then {"name": ..., "parameters": {...}} ("arguments" also accepted),
    # several objects separated by "; ". EOS <|eot_id|>, or <|eom_id|> after <|python_tag|>.
    fam, tp = "llama3_json", "llama3_json"
    return {
        "llama3_json_parameters": Shape(
            fam, tp, None,
            lambda p, d: _j({"name": "submit_patch", "parameters": {"patch": p}}) + "<|eot_id|>",
            "patch", "bare JSON object with 'parameters'"),
        "llama3_json_python_tag": Shape(
            fam, tp, None,
            lambda p, d: ("<|python_tag|>" + _j({"name": "apply_diff", "parameters": {
                "path": "toolz/itertoolz.py", "diff": p}}) + "<|eom_id|>"),
            "patch", "<|python_tag|> prefix, <|eom_id|> end"),
        "llama3_json_two_calls_semicolon": Shape(
            fam, tp, None,
            lambda p, d: (_j({"name": "read_file", "parameters": _READ_ARGS}) + "; "
                          + _j({"name": "submit_patch", "parameters": {"patch": p}})
                          + "<|eot_id|>"),
            "patch", "two calls on one line joined by '; ' (the parser splits on it)"),
        "llama3_json_invalid": Shape(
            fam, tp, None,
            lambda p, d: ('{"name": "submit_patch", "parameters": {"patch": '
                          + _j(p) + ", }}<|eot_id|>"),
            "none", "trailing comma: not JSON"),
    }


def _minimax() -> dict[str, Shape]:
    # MiniMax-M2: template unsloth-MiniMax-M2.jinja (llama.cpp models/templates): the
    # generation prompt ends with "]~b]ai\n<think>\n", so the completion is reasoning,
    # "\n</think>\n\n", content, then "\n<minimax:tool_call>\n" + per call
    # '<invoke name="NAME">\n' + '<parameter name="K">V</parameter>\n'... + "</invoke>\n" +
    # "</minimax:tool_call>", and the turn ends with "[e~[". vLLM minimax_m2_tool_parser.py
    # (values strip()ped); reasoning parsers minimax_m2 / minimax_m2_append_think.
    fam, tp, rp = "minimax_m2", "minimax_m2", "minimax_m2"

    def calls(*items):
        inv = "".join(f'<invoke name="{n}">\n'
                      + "".join(f'<parameter name="{k}">{v}</parameter>\n' for k, v in a.items())
                      + "</invoke>\n" for n, a in items)
        return f"\n<minimax:tool_call>\n{inv}</minimax:tool_call>"

    return {
        "minimax_m2_tool_call": Shape(
            fam, tp, rp,
            lambda p, d: (f"{_REASON}\n</think>\n\n" + calls(("submit_patch", {"patch": p}))
                          + "[e~["),
            "patch", "reasoning closed by a lone </think>, then an invoke; EOS [e~["),
        "minimax_m2_draft_then_answer": Shape(
            fam, tp, rp,
            lambda p, d: f"Draft:\n{_fence(d)}\nNo.\n</think>\n\n{_fence(p)}[e~[",
            "patch", "draft before the lone </think>, fenced patch after"),
        "minimax_m2_draft_only": Shape(
            fam, tp, rp,
            lambda p, d: f"{_fence(d)}\nUnsure.\n</think>\n\nNo change is needed.[e~[",
            "none", "the only diff is reasoning"),
        "minimax_m2_two_invokes": Shape(
            fam, tp, rp,
            lambda p, d: (f"{_REASON}\n</think>\n\n"
                          + calls(("read_file", _READ_ARGS),
                                  ("apply_diff", {"path": "toolz/itertoolz.py", "diff": p}))
                          + "[e~["),
            "patch", "two invokes in one tool_call block; the second has 'diff'"),
    }


def _seed_oss() -> dict[str, Shape]:
    # Seed-OSS: template ByteDance-Seed-OSS.jinja (llama.cpp models/templates): after
    # "<seed:bos>assistant\n": "<seed:think>{reasoning}</seed:think>", content, then per call
    # "\n<seed:tool_call>\n<function=NAME>\n" + "<parameter=K>V</parameter>\n"... +
    # "</function>\n</seed:tool_call>", then "<seed:eos>". vLLM seed_oss_tool_parser.py,
    # reasoning parser seed_oss. The budget-reflection sentence inside
    # <seed:cot_budget_reflect> follows the model card's example wording (not re-read here).
    fam, tp, rp = "seed_oss", "seed_oss", "seed_oss"
    return {
        "seed_oss_think_draft_then_answer": Shape(
            fam, tp, rp,
            lambda p, d: (f"<seed:think>Draft:\n{_fence(d)}\n<seed:cot_budget_reflect>I have "
                          "used 129 tokens, and there are 383 tokens remaining for use."
                          "</seed:cot_budget_reflect>\nIt misses the list branch.</seed:think>"
                          f"The fix:\n{_fence(p)}<seed:eos>"),
            "patch", "draft and a budget reflection inside <seed:think>, patch after"),
        "seed_oss_think_then_fence": Shape(
            fam, tp, rp,
            lambda p, d: f"<seed:think>{_REASON}</seed:think>{_fence(p)}<seed:eos>",
            "patch", "</seed:think> followed directly by the fence"),
        "seed_oss_tool_call": Shape(
            fam, tp, rp,
            lambda p, d: (f"<seed:think>{_REASON}</seed:think>\n<seed:tool_call>\n"
                          f"<function=submit_patch>\n<parameter=patch>{p}</parameter>\n"
                          "</function>\n</seed:tool_call><seed:eos>"),
            "patch", "XML call; value written raw, no newline after <parameter=K>"),
        "seed_oss_draft_only": Shape(
            fam, tp, rp,
            lambda p, d: (f"<seed:think>{_fence(d)}\nUnsure.</seed:think>I need the failing "
                          "test output.<seed:eos>"),
            "none", "draft only in reasoning"),
        "seed_oss_answer_with_mistral_tag_in_code": Shape(
            fam, tp, rp,
            lambda p, d: f"<seed:think>{_REASON}</seed:think>\n{_fence(p)}<seed:eos>",
            "patch", "a Mistral [/THINK] inside an added diff line is code",
            patch_of=with_tag_comment("[/THINK]")),
    }


def _hunyuan() -> dict[str, Shape]:
    # Hunyuan-A13B: vLLM hunyuan_a13b_reasoning_parser.py: "<think>\n...\n</think>\n<answer>\n
    # ...\n</answer>" (think start "<think>\n", response start "\n</think>\n<answer>\n",
    # response end "\n</answer>"). EOS token unconfirmed: none written.
    fam, rp = "hunyuan_a13b", "hunyuan_a13b"
    return {
        "hunyuan_a13b_think_then_answer": Shape(
            fam, None, rp,
            lambda p, d: (f"<think>\nDraft:\n{_fence(d)}\nIncomplete.\n</think>\n<answer>\n"
                          f"{_fence(p)}\n</answer>"),
            "patch", "draft in <think>, patch inside <answer>"),
        "hunyuan_a13b_draft_only": Shape(
            fam, None, rp,
            lambda p, d: (f"<think>\n{_fence(d)}\n</think>\n<answer>\nI need more context.\n"
                          "</answer>"),
            "none", "draft only in <think>"),
    }


def _cohere() -> dict[str, Shape]:
    # Cohere Command R7B / Command A Reasoning: vLLM cohere_command_reasoning_parser.py
    # (cohere_command3): <|START_THINKING|>..<|END_THINKING|>, <|START_RESPONSE|>..
    # <|END_RESPONSE|>, tool calls <|START_ACTION|>[{"tool_call_id": "0", "tool_name": ...,
    # "parameters": {...}}]<|END_ACTION|> (its xgrammar schema). Turn end
    # <|END_OF_TURN_TOKEN|> (llama.cpp's Command R7B handling). No vLLM tool parser name
    # covers it in the registry read here: tool_call_parser None.
    fam, rp = "cohere", "cohere_command3"
    return {
        "cohere_thinking_then_response_fence": Shape(
            fam, None, rp,
            lambda p, d: (f"<|START_THINKING|>Draft:\n{_fence(d)}\nIncomplete.<|END_THINKING|>"
                          f"<|START_RESPONSE|>{_fence(p)}<|END_RESPONSE|><|END_OF_TURN_TOKEN|>"),
            "patch", "draft in thinking; response starts directly with the fence"),
        "cohere_action_list": Shape(
            fam, None, rp,
            lambda p, d: ("<|START_THINKING|>I will read the file and submit the patch."
                          "<|END_THINKING|><|START_ACTION|>[\n    "
                          + _j({"tool_call_id": "0", "tool_name": "read_file",
                                "parameters": _READ_ARGS}) + ",\n    "
                          + _j({"tool_call_id": "1", "tool_name": "submit_patch",
                                "parameters": {"patch": p}})
                          + "\n]<|END_ACTION|><|END_OF_TURN_TOKEN|>"),
            "patch", "a list of two actions; the second carries the patch"),
        "cohere_draft_only": Shape(
            fam, None, rp,
            lambda p, d: (f"<|START_THINKING|>{_fence(d)}<|END_THINKING|><|START_RESPONSE|>"
                          "I could not find the bug.<|END_RESPONSE|><|END_OF_TURN_TOKEN|>"),
            "none", "draft only in thinking"),
    }


def _granite() -> dict[str, Shape]:
    # IBM Granite 3.x: vLLM granite_reasoning_parser.py: "Here is my thought process:" /
    # "Here is my response:" (also "Here's"); tool calls vLLM granite_tool_parser.py:
    # "<|tool_call|>" (3.0) or "<tool_call>" (3.1) then a JSON list of {"name", "arguments"}.
    # EOS <|end_of_text|> (Granite tokenizer; not re-read here).
    fam = "granite"
    return {
        "granite_thought_then_response": Shape(
            fam, None, "granite",
            lambda p, d: (f"Here is my thought process:\nDraft:\n{_fence(d)}\nIncomplete.\n"
                          f"Here is my response:\n{_fence(p)}<|end_of_text|>"),
            "patch", "plain-text markers; draft in the thought process"),
        "granite_heres_variant": Shape(
            fam, None, "granite",
            lambda p, d: (f"Here's my thought process:\n{_REASON}\nHere's my response:\n"
                          f"{_fence(p)}<|end_of_text|>"),
            "patch", "the \"Here's\" spelling the parser also accepts"),
        "granite_draft_only": Shape(
            fam, None, "granite",
            lambda p, d: (f"Here is my thought process:\n{_fence(d)}\nHere is my response:\n"
                          "I am not certain of the fix.<|end_of_text|>"),
            "none", "draft only in the thought process"),
        "granite_tool_call": Shape(
            fam, "granite", None,
            lambda p, d: ("<|tool_call|>" + _j([{"name": "submit_patch",
                                                 "arguments": {"patch": p}}])
                          + "<|end_of_text|>"),
            "patch", "Granite 3.0 <|tool_call|> JSON list"),
    }


def _openai_chat() -> dict[str, Shape]:
    # OpenAI-compatible chat messages as servers return them and TRL passes conversational
    # completions: {"role": "assistant", "content", "tool_calls": [{"id", "type": "function",
    # "function": {"name", "arguments": JSON string}}]}; vLLM with --reasoning-parser adds
    # "reasoning_content" (older) or "reasoning" (newer; OpenRouter also uses "reasoning").
    # apply_patch: Codex create_apply_patch_json_tool ({"input": V4A}) and the shell form
    # {"command": ["apply_patch", V4A]} (codex apply_patch_tool_instructions.md).
    fam = "openai_chat"

    def tc(i, name, args):
        return {"id": f"call_{i}", "type": "function",
                "function": {"name": name, "arguments": _j(args)}}

    return {
        "chat_reasoning_content_draft_content_patch": Shape(
            fam, None, "qwen3",
            lambda p, d: [{"role": "assistant", "reasoning_content": f"Draft:\n{_fence(d)}",
                           "content": f"The fix:\n{_fence(p)}"}],
            "patch", "vLLM reasoning_content holds the draft, content the patch"),
        "chat_reasoning_field_draft_only": Shape(
            fam, None, "deepseek_r1",
            lambda p, d: {"role": "assistant", "reasoning": f"Maybe:\n{_fence(d)}",
                          "content": "I could not fix it."},
            "none", "newer 'reasoning' field holds the only diff"),
        "chat_reasoning_only_no_content": Shape(
            fam, None, "qwen3",
            lambda p, d: [{"role": "assistant", "reasoning_content": f"{_fence(p)}",
                           "content": None}],
            "none", "a patch only in reasoning and content None (truncated in reasoning)"),
        "chat_tool_call_apply_patch_v4a": Shape(
            fam, None, None,
            lambda p, d: [{"role": "assistant", "content": None, "tool_calls": [
                tc(1, "apply_patch", {"input": unified_to_v4a(p)})]}],
            "v4a", "Codex JSON apply_patch tool: arguments {'input': V4A}"),
        "chat_codex_shell_apply_patch": Shape(
            fam, None, None,
            lambda p, d: [{"role": "assistant", "content": "", "tool_calls": [
                tc(1, "shell", {"command": ["apply_patch", unified_to_v4a(p)],
                                "workdir": "/repo"})]}],
            "v4a", "Codex shell tool running apply_patch with the V4A text as argv[1]"),
        "chat_several_tool_calls": Shape(
            fam, None, None,
            lambda p, d: [{"role": "assistant", "content": "Running checks, then patching.",
                           "tool_calls": [tc(1, "read_file", _READ_ARGS),
                                          tc(2, "submit_patch", {"patch": p}),
                                          tc(3, "run_tests", _TEST_ARGS)]}],
            "patch", "three calls, only the middle one carries a patch"),
        "chat_edit_file_diff_argument": Shape(
            fam, None, None,
            lambda p, d: [{"role": "assistant", "content": None, "tool_calls": [
                tc(1, "edit_file", {"path": "toolz/itertoolz.py", "diff": p})]}],
            "patch", "a file-edit tool whose 'diff' argument is the unified diff"),
        "chat_tool_call_arguments_truncated": Shape(
            fam, None, None,
            lambda p, d: [{"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {
                    "name": "submit_patch", "arguments": _j({"patch": p})[:-2]}}]}],
            "none", "arguments string cut before its end: not JSON"),
        "chat_unparsed_tool_call_text_with_reasoning": Shape(
            fam, None, "qwen3",
            lambda p, d: [{"role": "user", "content": "Fix getter."},
                          {"role": "assistant", "reasoning_content": f"{_fence(d)}",
                           "content": "<tool_call>\n" + _j({"name": "submit_patch",
                                                            "arguments": {"patch": p}})
                           + "\n</tool_call>"}],
            "patch", "served without a tool parser: the call stays as text in content"),
    }


def _responses() -> dict[str, Shape]:
    # OpenAI Responses API output items (API reference; openai-agents / SDK types):
    # {"type": "reasoning", "id", "summary": [{"type": "summary_text", "text"}]} (vLLM's
    # gpt-oss Responses server also fills "content": [{"type": "reasoning_text", "text"}]),
    # {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text",
    # "annotations": []}]}, {"type": "function_call", "call_id", "name", "arguments"},
    # {"type": "custom_tool_call", "call_id", "name", "input"} (freeform tools: Codex's
    # apply_patch for GPT-5), {"type": "apply_patch_call", "call_id", "status", "operation":
    # {"type": "update_file" | "create_file" | "delete_file", "path", "diff"}} (tools-apply-
    # patch guide: the diff is V4A hunks, no envelope).
    fam = "responses_api"

    def reasoning(text, vllm=False):
        item = {"type": "reasoning", "id": "rs_1", "summary": [
            {"type": "summary_text", "text": text}]}
        if vllm:
            item = {"type": "reasoning", "id": "rs_1", "summary": [],
                    "content": [{"type": "reasoning_text", "text": text}]}
        return item

    def message(text):
        return {"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}

    def apply_patch_calls(p):
        items = []
        for i, (kind, path, diff) in enumerate(v4a_file_ops(p)):
            op = {"type": kind, "path": path}
            if kind != "delete_file":
                op["diff"] = diff
            items.append({"type": "apply_patch_call", "id": f"apc_{i}", "call_id": f"call_{i}",
                          "status": "completed", "operation": op})
        return items

    return {
        "responses_reasoning_then_message": Shape(
            fam, None, None,
            lambda p, d: [reasoning(f"Draft:\n{_fence(d)}"), message(f"Fix:\n{_fence(p)}")],
            "patch", "reasoning summary holds a draft, the message the patch"),
        "responses_reasoning_only_draft": Shape(
            fam, None, "openai_gptoss",
            lambda p, d: [reasoning(f"{_fence(d)}\nNot sure.", vllm=True),
                          message("I could not find the bug.")],
            "none", "vLLM reasoning_text content holds the only diff"),
        "responses_function_call": Shape(
            fam, None, None,
            lambda p, d: [reasoning(_REASON),
                          {"type": "function_call", "id": "fc_1", "call_id": "call_1",
                           "name": "submit_patch", "arguments": _j({"patch": p}),
                           "status": "completed"}],
            "patch", "function_call item, arguments a JSON string"),
        "responses_several_function_calls": Shape(
            fam, None, None,
            lambda p, d: [{"type": "function_call", "id": "fc_1", "call_id": "call_1",
                           "name": "read_file", "arguments": _j(_READ_ARGS),
                           "status": "completed"},
                          {"type": "function_call", "id": "fc_2", "call_id": "call_2",
                           "name": "apply_diff", "arguments": _j({"path": "toolz/itertoolz.py",
                                                                   "diff": p}),
                           "status": "completed"},
                          message("Patched.")],
            "patch", "two calls and a message; only the second call carries a diff"),
        "responses_custom_tool_call_apply_patch": Shape(
            fam, None, None,
            lambda p, d: [reasoning(_REASON),
                          {"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_1",
                           "name": "apply_patch", "input": unified_to_v4a(p)}],
            "v4a", "GPT-5 freeform apply_patch: raw V4A as 'input'"),
        "responses_apply_patch_call": Shape(
            fam, None, None,
            lambda p, d: [reasoning(_REASON), *apply_patch_calls(p)],
            "v4a", "built-in apply_patch tool: one apply_patch_call per file, "
                   "operation.diff = V4A hunks"),
        "responses_full_response_object": Shape(
            fam, None, None,
            lambda p, d: {"id": "resp_1", "object": "response", "status": "completed",
                          "model": "gpt-5", "output": [
                              reasoning(f"Draft:\n{_fence(d)}"),
                              message(f"{_fence(p)}")]},
            "patch", "the whole Response object, not just its output list"),
    }


def _anthropic() -> dict[str, Shape]:
    # Anthropic Messages API content blocks: {"type": "thinking", "thinking", "signature"},
    # {"type": "redacted_thinking", "data"}, {"type": "text", "text"}, {"type": "tool_use",
    # "id", "name", "input": {...}}; a response is {"id", "type": "message", "role":
    # "assistant", "content": [...], "stop_reason"}.
    fam = "anthropic"
    sig = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"

    def msg(blocks, stop="end_turn"):
        return {"id": "msg_01", "type": "message", "role": "assistant", "model": "claude",
                "content": blocks, "stop_reason": stop}

    return {
        "anthropic_thinking_then_text": Shape(
            fam, None, None,
            lambda p, d: msg([{"type": "thinking", "thinking": f"Draft:\n{_fence(d)}",
                               "signature": sig},
                              {"type": "text", "text": f"The fix:\n{_fence(p)}"}]),
            "patch", "draft in a thinking block, patch in text (response object)"),
        "anthropic_thinking_then_tool_use": Shape(
            fam, None, None,
            lambda p, d: [{"role": "assistant", "content": [
                {"type": "thinking", "thinking": f"Draft:\n{_fence(d)}", "signature": sig},
                {"type": "tool_use", "id": "toolu_01", "name": "submit_patch",
                 "input": {"patch": p}}]}],
            "patch", "tool_use input {'patch'} after thinking"),
        "anthropic_redacted_thinking_then_text": Shape(
            fam, None, None,
            lambda p, d: msg([{"type": "redacted_thinking",
                               "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3"},
                              {"type": "text", "text": _fence(p)}]),
            "patch", "redacted_thinking carries no text; the patch is in text"),
        "anthropic_thinking_only_draft": Shape(
            fam, None, None,
            lambda p, d: msg([{"type": "thinking", "thinking": f"{_fence(d)}\nUnsure.",
                               "signature": sig},
                              {"type": "text", "text": "I need to see the tests first."}]),
            "none", "the only diff is in thinking"),
        "anthropic_two_tool_uses": Shape(
            fam, None, None,
            lambda p, d: msg([{"type": "text", "text": "Reading, then editing."},
                              {"type": "tool_use", "id": "toolu_01", "name": "read_file",
                               "input": _READ_ARGS},
                              {"type": "tool_use", "id": "toolu_02", "name": "edit_file",
                               "input": {"path": "toolz/itertoolz.py", "diff": p}}], "tool_use"),
            "patch", "two tool_use blocks, the second a file edit with 'diff'"),
    }


def _swebench() -> dict[str, Shape]:
    # SWE-bench predictions: swebench.com/SWE-bench/guides/evaluation ({"instance_id",
    # "model_name_or_path", "model_patch"}, JSONL or list) and sb-cli's dictionary format
    # {instance_id: {"model_patch", "model_name_or_path"}}.
    fam = "swebench"
    iid = "pytoolz__toolz-123"
    return {
        "swebench_prediction": Shape(
            fam, None, None,
            lambda p, d: {"instance_id": iid, "model_name_or_path": "policy-step-120",
                          "model_patch": p},
            "patch", "one prediction dict; the key is model_patch"),
        "swebench_prediction_list": Shape(
            fam, None, None,
            lambda p, d: [{"instance_id": iid, "model_name_or_path": "policy-step-120",
                           "model_patch": p}],
            "patch", "list format (one prediction)"),
        "swebench_prediction_dict_format": Shape(
            fam, None, None,
            lambda p, d: {iid: {"model_patch": p, "model_name_or_path": "policy-step-120"}},
            "patch", "sb-cli dictionary format keyed by instance id"),
        "swebench_empty_model_patch": Shape(
            fam, None, None,
            lambda p, d: {"instance_id": iid, "model_name_or_path": "policy-step-120",
                          "model_patch": ""},
            "none", "an empty model_patch is no patch"),
    }


def _search_replace() -> dict[str, Shape]:
    # aider editblock format (aider/coders/editblock_prompts.py) and Agentless repair prompts
    # (agentless/repair/repair.py): converted against the repo, expected diff = patch.
    fam = "search_replace"
    return {
        "aider_search_replace": Shape(
            fam, None, None,
            lambda p, d: ("To make the one-element list return a tuple:\n\n"
                          + unified_to_search_replace(p)),
            "v4a", "aider: path line, fenced SEARCH/REPLACE block(s)"),
        "agentless_search_replace": Shape(
            fam, None, None,
            lambda p, d: ("The bug is in getter.\n\n"
                          + unified_to_search_replace(p, style="agentless")),
            "v4a", "Agentless: ### path inside the fence"),
        "aider_after_think_with_draft": Shape(
            fam, None, "qwen3",
            lambda p, d: (f"<think>\nDraft:\n{_fence(d)}\n</think>\n\n"
                          + unified_to_search_replace(p) + "<|im_end|>"),
            "v4a", "SEARCH/REPLACE answer after a reasoning draft (the draft is not the edit)"),
        "search_replace_only_in_think": Shape(
            fam, None, "qwen3",
            lambda p, d: (f"<think>\n{unified_to_search_replace(p)}\nNot sure.\n</think>\n\n"
                          "I will wait for the test output.<|im_end|>"),
            "none", "the only edit is inside reasoning"),
    }


def _v4a() -> dict[str, Shape]:
    # Raw V4A text as a completion (codex apply_patch_tool_instructions.md grammar).
    fam = "v4a"
    return {
        "v4a_bare_text": Shape(
            fam, None, None,
            lambda p, d: unified_to_v4a(p),
            "v4a", "the completion is the V4A patch itself"),
        "v4a_in_fence_after_prose": Shape(
            fam, None, None,
            lambda p, d: f"Apply this patch:\n\n{_fence(unified_to_v4a(p), '')}\n",
            "v4a", "V4A in an untagged fence after prose"),
    }


def _answer_choice() -> dict[str, Shape]:
    # Which diff is the answer, and degenerate texts. Markdown rules: CommonMark (list item
    # continuation indentation, block quotes "> ").
    fam = "markdown"

    def split_blocks(p, d):
        first, rest = split_second_hunk(p)
        if not rest:
            return f"The fix:\n{_fence(first)}"
        return (f"First the list branch:\n{_fence(first)}\nThen, further down, the scalar "
                f"branch:\n{_fence(rest)}")

    def numbered_list(p, d):
        body = "".join("    " + line for line in p.splitlines(keepends=True))
        return (f"Here is the plan:\n\n1. Edit `{first_path(p)}`:\n\n    ```diff\n{body}"
                "    ```\n\n2. Run the tests.\n")

    def quote_fenced(p, d):
        inner = f"The fix:\n\n```diff\n{p}```\n"
        return "".join(">\n" if line == "\n" else "> " + line
                       for line in inner.splitlines(keepends=True))

    def quote_bare(p, d):
        return "Reviewer's suggestion:\n\n" + "".join(
            "> " + line for line in p.splitlines(keepends=True)) + "\nI agree with it.\n"

    tags = ("<think></think><tool_call>[TOOL_CALLS]<|channel|>final<|message|>```diff "
            "<|tool_calls_section_begin|><｜tool▁calls▁begin｜><seed:think>[THINK]"
            "<minimax:tool_call><|START_RESPONSE|>◁think▷*** Begin Patch @@ -1 +1 @@ ")
    return {
        "hunks_split_over_two_fences": Shape(
            fam, None, None, split_blocks,
            "patch", "one file's two hunks in two fenced blocks, the second without "
                     "---/+++ headers: the joined patch (one block when the patch has "
                     "a single hunk)"),
        "final_unfenced_correction": Shape(
            fam, None, None,
            lambda p, d: (f"First attempt:\n{_fence(d)}\nWait, that misses the list branch. "
                          f"Corrected patch:\n\n{p}"),
            "patch", "an earlier wrong fenced diff, then the final bare diff: the last one"),
        "fence_indented_four_in_numbered_list": Shape(
            fam, None, None, numbered_list,
            "patch", "```diff indented four spaces under a numbered item; body de-indented"),
        "fenced_diff_in_quote_block": Shape(
            fam, None, None, quote_fenced,
            "patch", "a fenced diff inside a '> ' block quote"),
        "bare_diff_in_quote_block": Shape(
            fam, None, None, quote_bare,
            "patch", "a bare diff quoted line by line with '> '"),
        "one_mb_line_of_tags": Shape(
            fam, None, None,
            lambda p, d: tags * (1_000_000 // len(tags) + 1),
            "none", "a single 1 MB line full of every family's tags, no diff"),
    }


SHAPES: dict[str, Shape] = {
    **_qwen3(), **_qwen3_coder(), **_glm45(), **_kimi(), **_kimi_triangle(), **_deepseek(),
    **_mistral(), **_harmony(), **_pythonic(), **_llama3_json(), **_minimax(), **_seed_oss(),
    **_hunyuan(), **_cohere(), **_granite(), **_openai_chat(), **_responses(), **_anthropic(),
    **_swebench(), **_search_replace(), **_v4a(), **_answer_choice(),
}

assert all(s.expect in EXPECTS for s in SHAPES.values())


def _self_check() -> dict[str, int]:
    """Render every shape with the sample diffs; count shapes per family."""
    counts: dict[str, int] = {}
    for name, shape in SHAPES.items():
        p = shape.patch_of(SAMPLE_PATCH) if shape.patch_of else SAMPLE_PATCH
        out = shape.render(p, SAMPLE_DRAFT)
        assert isinstance(out, str | dict | list), name
        assert out == shape.render(p, SAMPLE_DRAFT), f"{name} is not deterministic"
        counts[shape.family] = counts.get(shape.family, 0) + 1
    return counts


if __name__ == "__main__":
    for family, n in sorted(_self_check().items()):
        print(f"{family:22} {n}")
    print(f"{'total':22} {len(SHAPES)}")
