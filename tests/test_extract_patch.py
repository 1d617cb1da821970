"""extract_patch on the shapes completions really have (special tokens after the fence, a
fence never closed, reasoning drafts, tool calls, CRLF, bare diffs after prose), each checked
end to end: the extracted patch is the one the model meant, and ``git apply --check`` takes
it through the apply step's strategies against the toolz example's repo (or a small repo
with CRLF and markdown files). Controls: text that only looks like a patch gives None."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from proctor.patch import APPLY_STRATEGIES
from proctor.rl import extract_patch, find_patch
from tests import completion_shapes


def git(cwd: Path, *args: str, data: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-c", "core.autocrlf=false", *args], cwd=cwd, input=data,
                          capture_output=True, check=False)


def applies(repo: Path, patch: str) -> str | None:
    """The first of the apply step's strategies under which ``git apply --check`` takes
    the patch in ``repo`` (None: none does)."""
    raw = patch.encode()
    for name, flags, transform in APPLY_STRATEGIES:
        data = transform(raw) if transform else raw
        if git(repo, "apply", "--check", "--whitespace=nowarn", *flags, "-",
               data=data).returncode == 0:
            return name
    return None


@pytest.fixture(scope="module")
def repo(toolz_task, tmp_path_factory) -> Path:
    """A git copy of the toolz task's repo/ (what the apply step patches)."""
    work = tmp_path_factory.mktemp("extract") / "repo"
    shutil.copytree(toolz_task / "repo", work)
    git(work, "init", "-q")
    return work


@pytest.fixture(scope="module")
def ref(toolz_patches) -> str:
    return toolz_patches["reference"].decode()


@pytest.fixture(scope="module")
def partial(toolz_patches) -> str:
    return toolz_patches["partial"].decode()


# --------------------------------------------------------------------------- shapes -> reference


def tool_call_messages(patch: str) -> list:
    return [{"role": "user", "content": "fix getter"},
            {"role": "assistant", "content": "I will submit the fix.", "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "submit_patch",
                              "arguments": json.dumps({"patch": patch})}}]}]


SHAPES = {
    # OpenRLHF keeps special tokens: the EOS comes right after the closing fence.
    "fence_then_eos_s": lambda p, d: f"The fix:\n```diff\n{p}```</s>",
    "fence_then_im_end": lambda p, d: f"```diff\n{p}```<|im_end|>",
    "fence_then_endoftext": lambda p, d: f"```diff\n{p}```<|endoftext|>",
    "fence_then_eot_id": lambda p, d: f"```diff\n{p}```<|eot_id|>",
    "fence_then_end": lambda p, d: f"```diff\n{p}``` <|end|>",
    "tokens_on_following_lines": lambda p, d: f"```diff\n{p}```\n<|im_end|>\n<|endoftext|>",
    "text_after_fence": lambda p, d: f"```diff\n{p}```\nThis fixes both branches.\n",
    "fence_never_closed_eos": lambda p, d: f"Patch:\n```diff\n{p}<|im_end|>",
    "fence_never_closed": lambda p, d: f"```diff\n{p}",
    "eos_glued_to_last_line": lambda p, d: f"```diff\n{p.rstrip()}</s>",
    "last_diff_block_wins": lambda p, d: (f"First try:\n```diff\n{d}```\nTest:\n```python\n"
                                          f"assert getter(0)([1]) == 1\n```\nBetter:\n"
                                          f"```diff\n{p}```"),
    "patch_tag": lambda p, d: f"```patch\n{p}```",
    "udiff_tag": lambda p, d: f"```udiff\n{p}```",
    "tag_with_attributes": lambda p, d: f"```Diff title=fix.diff\n{p}```",
    "no_tag": lambda p, d: f"```\n{p}```",
    "tilde_fence": lambda p, d: f"~~~diff\n{p}~~~",
    "four_backticks": lambda p, d: f"````diff\n{p}````",
    "indented_in_a_list": lambda p, d: "1. Apply:\n   ```diff\n" + "".join(
        "   " + ln for ln in p.splitlines(keepends=True)) + "   ```\n",
    "bare": lambda p, d: p,
    "bare_after_prose": lambda p, d: f"Here is the fix:\n\n{p}\nLet me know if it works.\n",
    "start_tokens_chatml": lambda p, d: f"<|im_start|>assistant\n```diff\n{p}```<|im_end|>",
    "start_tokens_llama3": lambda p, d: ("<|start_header_id|>assistant<|end_header_id|>\n\n"
                                         f"{p}<|eot_id|>"),
    "think_draft_then_answer": lambda p, d: (f"<think>Maybe:\n```diff\n{d}```\nNo, both parts."
                                             f"</think>\n```diff\n{p}```"),
    "lone_think_close": lambda p, d: f"Draft:\n{d}\n</think>\n\nAnswer:\n```diff\n{p}```",
    "openai_tool_calls": lambda p, d: tool_call_messages(p),
    "openai_tool_calls_dict_arguments": lambda p, d: [
        {"role": "assistant", "content": None, "tool_calls": [
            {"function": {"name": "submit", "arguments": {"diff": p}}}]}],
    "qwen_tool_call": lambda p, d: ('<tool_call>\n{"name": "submit_patch", "arguments": '
                                    + json.dumps({"patch": p}) + "}\n</tool_call><|im_end|>"),
    "qwen_tool_call_raw_newlines": lambda p, d: (
        '<tool_call>{"name": "submit", "arguments": {"patch": "'
        + p.replace("\\", "\\\\").replace('"', '\\"') + '"}}'),
    "json_object": lambda p, d: json.dumps({"explanation": "both branches", "diff": p}),
    "tool_use_part": lambda p, d: [{"role": "assistant", "content": [
        {"type": "text", "text": "Submitting."},
        {"type": "tool_use", "id": "t1", "name": "submit", "input": {"patch": p}}]}],
    "message_parts": lambda p, d: [{"role": "assistant", "content": [
        {"type": "text", "text": f"```diff\n{p}```"}]}],
    "markdown_wrapper": lambda p, d: f"````markdown\n```diff\n{p}```\n````\n<|im_end|>",
    "untagged_wrapper": lambda p, d: f"```\n```diff\n{p}```\n```",
    "mistral_tool_calls": lambda p, d: ("[TOOL_CALLS]["
                                        + json.dumps({"name": "submit", "arguments": {
                                            "patch": p}}) + "]</s>"),
    "json_in_a_fence": lambda p, d: f"```json\n{json.dumps({'patch': p})}\n```<|im_end|>",
    "json_after_prose": lambda p, d: ("I will call the tool.\n"
                                      + json.dumps({"name": "submit", "arguments": {
                                          "diff": p}}) + "\nDone."),
    "apply_patch_raw_input": lambda p, d: [{"role": "assistant", "tool_calls": [
        {"function": {"name": "apply_patch", "arguments": json.dumps({"input": p})}}]}],
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_real_shapes_give_the_patch_and_it_applies(shape, repo, ref, partial):
    patch = extract_patch(SHAPES[shape](ref, partial))
    assert patch == ref
    assert applies(repo, patch) == "git_apply"


def test_bare_diff_whose_empty_context_lines_lost_their_space(repo, ref):
    stripped = ref.replace("\n \n", "\n\n")
    patch = extract_patch(f"Fix:\n{stripped}\nThat is all.\n")
    assert patch == stripped
    assert applies(repo, patch) is not None


def test_crlf_completion_applies_through_the_lf_strategy(repo, ref):
    completion = f"Fix:\r\n```diff\r\n{ref}```\r\n".replace("\n", "\r\n").replace("\r\r", "\r")
    patch = extract_patch(completion)
    assert patch == ref.replace("\n", "\r\n")  # bytes kept: CR may be the file's own
    assert applies(repo, patch) == "git_apply_lf"


def test_no_newline_at_end_of_file_lines(repo, make_toolz_patch):
    new_file = make_toolz_patch({"toolz/extra.py": (None, "X = 1")}).decode()
    assert "\\ No newline at end of file" in new_file
    for completion in (new_file, f"```diff\n{new_file}```</s>", f"Now:\n\n{new_file}Done."):
        patch = extract_patch(completion)
        assert patch == new_file
        assert applies(repo, patch) == "git_apply"


# --------------------------------------------------------------------------- CRLF and markdown repo


@pytest.fixture(scope="module")
def mini(tmp_path_factory) -> Path:
    """A repo with a CRLF file, a markdown file with a fenced block, an HTML file and a
    Python file of tag names."""
    work = tmp_path_factory.mktemp("mini") / "repo"
    work.mkdir()
    (work / "win.py").write_bytes(b"a = 1\r\nb = 2\r\n")
    (work / "doc.md").write_text("Use:\n\n```\nrun()\n```\n\nEnd.\n")
    (work / "page.html").write_text("<p>price</p>\n")
    (work / "tags.py").write_text('OPEN = "x"\nCLOSE = "y"\n')
    git(work, "init", "-q")
    git(work, "add", "-A")
    git(work, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    return work


def diff_of(repo: Path, edits: dict[str, bytes]) -> str:
    for rel, data in edits.items():
        (repo / rel).write_bytes(data)
    out = git(repo, "diff", "--no-color").stdout.decode()
    git(repo, "checkout", "-q", "--", ".")
    return out


def test_crlf_file_keeps_its_carriage_returns(mini):
    patch_text = diff_of(mini, {"win.py": b"a = 1\r\nb = 3\r\n"})
    assert "b = 3\r\n" in patch_text
    patch = extract_patch(f"```diff\n{patch_text}```<|im_end|>")
    assert patch == patch_text and applies(mini, patch) == "git_apply"


def test_markdown_fence_context_line_does_not_close_the_block(mini):
    patch_text = diff_of(mini, {"doc.md": b"Use:\n\n```\nrun(fast=True)\n```\n\nEnd.\n"})
    assert "\n ```\n" in patch_text
    for completion in (f"```diff\n{patch_text}```", f"```\n{patch_text}```</s>", patch_text):
        patch = extract_patch(completion)
        assert patch == patch_text and applies(mini, patch) == "git_apply"


def test_special_token_text_inside_the_diff_stays(mini):
    patch_text = diff_of(mini, {"page.html": b"<p><s>price</s> sale</p>\n"})
    for completion in (f"```diff\n{patch_text}```</s>", f"{patch_text}<|endoftext|>"):
        patch = extract_patch(completion)
        assert patch == patch_text and applies(mini, patch) == "git_apply"


@pytest.mark.parametrize("tag", ["think", "thinking", "tool_call"])
def test_reasoning_and_tool_tags_in_diff_lines_are_code(mini, tag):
    patch_text = diff_of(mini, {"tags.py": f'OPEN = "<{tag}>"\nCLOSE = "</{tag}>"\n'.encode()})
    for completion in (f"```diff\n{patch_text}```<|im_end|>", f"Fix:\n{patch_text}",
                       f"<think>Quote the tags.</think>\n```diff\n{patch_text}```"):
        patch = extract_patch(completion)
        assert patch == patch_text and applies(mini, patch) == "git_apply"


def test_a_diff_given_one_block_per_file_is_joined(mini):
    first = diff_of(mini, {"page.html": b"<p>sale</p>\n"})
    second = diff_of(mini, {"tags.py": b'OPEN = "("\nCLOSE = "y"\n'})
    draft = diff_of(mini, {"page.html": b"<p>draft</p>\n"})
    for completion in (f"In page.html:\n```diff\n{first}```\nIn tags.py:\n```diff\n{second}```",
                       f"Draft:\n```diff\n{draft}```\nThen:\n```diff\n{first}```\n"
                       f"And:\n```diff\n{second}```<|im_end|>",
                       f"page.html:\n{first}\ntags.py:\n{second}"):
        patch = extract_patch(completion)
        assert patch == first + second and applies(mini, patch) == "git_apply"


# --------------------------------------------------------------------------- controls


@pytest.mark.parametrize("completion", [
    "To compare, run diff --git a/toolz/itertoolz.py b/toolz/itertoolz.py in your shell.",
    "diff --git a/toolz/itertoolz.py b/toolz/itertoolz.py\nis what I would run first.",
    "```python\ndef getter(index):\n    return operator.itemgetter(index)\n```</s>",
    "```\n--- a/x\nb\n```",
    "```diff\n\n```</s>",
    "<|im_end|>",
    "<|im_start|>assistant\nI am not sure.<|im_end|>",
    '<tool_call>{"name": "run_tests", "arguments": {"path": "toolz"}}</tool_call>',
    '{"answer": "no change needed"}',
    "Writing it:\n" + json.dumps({"name": "write_file", "arguments": {
        "path": "fix.patch", "content": "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n"}}),
    '```json\n{"input": "just text"}\n```',
    [{"role": "assistant", "content": "no diff", "tool_calls": [
        {"function": {"name": "read", "arguments": "{\"path\": \"a.py\"}"}}]}],
])
def test_controls_are_not_patches(completion):
    assert extract_patch(completion) is None


@pytest.mark.parametrize("completion", [
    [1, "x", None], {"tool_calls": 5}, {"role": "assistant", "content": {"a": 1}},
    [{"role": "assistant", "tool_calls": ["x", {"function": {"arguments": "{not json"}}]}],
    {"patch": 3}, '{"patch": ' + "[" * 100_000, "<tool_call>" + "[" * 100_000, 42, b"bytes",
    [{"role": "assistant", "content": [{"type": "tool_use", "input": "nope"}, 7]}],
])
def test_odd_shapes_never_raise(completion):
    assert extract_patch(completion) is None


@pytest.mark.parametrize("where", ["think", "unclosed_think", "user_message"])
def test_a_diff_outside_the_answer_is_not_a_patch(where, ref):
    completion = {
        "think": f"<think>```diff\n{ref}```</think>I am not sure what to change.",
        "unclosed_think": f"<think>Let me try:\n```diff\n{ref}```\nand then",
        "user_message": [{"role": "user", "content": f"```diff\n{ref}```"},
                         {"role": "assistant", "content": "No idea."}],
    }[where]
    assert extract_patch(completion) is None


@pytest.mark.parametrize("completion", [
    " \n" * 50_000 + "x",              # degenerate whitespace (was 19 s: quadratic)
    "<think>" * 20_000,                 # reasoning opened again and again (was 17 s)
    "x" + " </s>" * 50_000,
    "```diff\n" + "\n" * 200_000,
    "<tool_call>{" * 20_000,
    '+x = "<think>" + y\n' * 20_000,
])
def test_degenerate_completions_take_linear_time(completion):
    import time

    start = time.monotonic()
    assert extract_patch(completion) is None
    assert time.monotonic() - start < 3.0


@pytest.mark.docker
def test_rewritten_patches_score_like_the_reference(toolz_task, ref):
    """The two shapes whose bytes differ from the reference (CRLF throughout, empty context
    lines without their space) score what the reference scores, through the real apply
    step, integrity check and suites."""
    from proctor.rl import Completion, score_completions

    crlf = f"```diff\n{ref}```<|im_end|>".replace("\n", "\r\n")
    stripped = "Fix:\n" + ref.replace("\n \n", "\n\n") + "\nThat is all.\n"
    recs = score_completions([Completion(task=str(toolz_task), completion=c)
                              for c in (crlf, stripped)])
    assert [r.reward for r in recs] == [pytest.approx(0.998)] * 2, [r.error for r in recs]
    assert recs[0].apply_strategy == "git_apply_lf" and not recs[1].integrity.violated


@pytest.mark.docker
def test_a_record_says_what_the_extraction_decided(toolz_task, ref, partial):
    from proctor.rl import Completion, score_completions
    from proctor.rl.extract import NOT_FOUND

    harmony = (f"<|channel|>analysis<|message|>```diff\n{partial}```<|end|><|start|>"
               f"assistant<|channel|>final<|message|>```diff\n{ref}```<|return|>")
    only_reasoning = f"<think>\n```diff\n{partial}```\n</think>\nI could not finish."
    recs = score_completions([Completion(task=str(toolz_task), completion=c)
                              for c in (harmony, only_reasoning)])
    assert recs[0].reward == pytest.approx(0.998), recs[0].error
    got = recs[0].evidence["extraction"].details
    assert (got["source"], got["reasoning_parser"], got["dropped"]) == ("fenced", "auto", [])
    fence = len("```diff\n```")
    assert got["reasoning_removed"] == [f"harmony analysis message ({len(partial) + fence} "
                                        "characters)"]
    assert recs[1].reason == "no_patch" and recs[1].reward == 0.0
    none = recs[1].evidence["extraction"].details
    assert none["source"] is None and none["why"] == NOT_FOUND
    assert none["reasoning_removed"] == [
        f"<think>...</think> reasoning ({len(only_reasoning) - len('I could not finish.') - 1}"
        " characters)"]
    assert recs[1].component_notes["reason"] == NOT_FOUND


# ------------------------------------------------------------------ reasoning, every family

#: family -> (reasoning parser, the completion with ``{d}`` drafted in reasoning and ``{p}``
#: the answer; a fence right after the closing tag or header).
REASONING = {
    "deepseek_r1": ("deepseek_r1", "<think>\nDraft:\n```diff\n{d}```\n</think>```diff\n{p}```"),
    "qwen3_open_in_prompt": ("qwen3", "Draft:\n```diff\n{d}```\n</think>\n\n```diff\n{p}```"),
    "seed_oss": ("seed_oss", "<seed:think>```diff\n{d}```</seed:think>\n```diff\n{p}```"),
    "kimi": ("kimi_k2", "◁think▷```diff\n{d}```◁/think▷```diff\n{p}```"),
    "magistral": ("mistral", "[THINK]Draft:\n```diff\n{d}```[/THINK]\n```diff\n{p}```</s>"),
    "cohere": ("cohere_command3", "<|START_THINKING|>```diff\n{d}```<|END_THINKING|>"
                                  "<|START_RESPONSE|>```diff\n{p}```<|END_RESPONSE|>"),
    "granite": ("granite", "Here is my thought process:\n```diff\n{d}```\n"
                           "Here is my response:\n```diff\n{p}```"),
    "gpt_oss_final": ("openai_gptoss",
                      "<|channel|>analysis<|message|>Draft:\n```diff\n{d}```<|end|>"
                      "<|start|>assistant<|channel|>final<|message|>```diff\n{p}```<|return|>"),
    "gpt_oss_final_first": ("openai_gptoss",
                            "<|channel|>final<|message|>{p}<|end|>"
                            "<|start|>assistant<|channel|>analysis<|message|>{d}<|end|>"),
    "gpt_oss_tool_call": ("openai_gptoss",
                          "<|channel|>analysis<|message|>{d}<|end|><|start|>assistant"
                          "<|channel|>commentary to=functions.submit_patch <|constrain|>json"
                          "<|message|>{{args}}<|call|>"),
}


@pytest.mark.parametrize("family", list(REASONING))
@pytest.mark.parametrize("parser", ["auto", "named"])
def test_reasoning_of_every_family_never_counts(family, parser, repo, ref, partial):
    name, shape = REASONING[family]
    used = "auto" if parser == "auto" else name

    def render(p: str, args: str) -> str:
        return shape.replace("{d}", partial).replace("{p}", p).replace("{{args}}", args)

    patch = extract_patch(render(ref, json.dumps({"patch": ref})), reasoning_parser=used)
    assert patch == ref
    assert applies(repo, patch) == "git_apply"
    # the draft alone, in reasoning, with no answer: no patch
    assert extract_patch(render("", "{}"), reasoning_parser=used) is None


def test_a_forbidden_path_in_harmony_analysis_is_not_joined_to_the_answer(
        ref, make_toolz_patch):
    cheat = make_toolz_patch({"toolz/tests/test_itertoolz.py": (None, "X = 1\n")}).decode()
    completion = (f"<|channel|>analysis<|message|>First:\n{cheat}\n<|end|><|start|>assistant"
                  f"<|channel|>final<|message|>```diff\n{ref}```<|return|>")
    assert extract_patch(completion) == ref


def test_a_named_parser_reads_only_its_family_s_syntax(ref, partial):
    completion = f"[THINK]```diff\n{partial}```[/THINK]\n```diff\n{ref}```"
    assert extract_patch(completion, reasoning_parser="mistral") == ref
    only_draft = f"[THINK]\n```diff\n{partial}```\n[/THINK]\nDone."
    assert extract_patch(only_draft, reasoning_parser="mistral") is None
    # read as DeepSeek's (or with no reasoning syntax), [THINK] is text
    assert extract_patch(only_draft, reasoning_parser="deepseek_r1") == partial
    assert extract_patch(only_draft, reasoning_parser="none") == partial


def test_an_unknown_reasoning_parser_is_a_configuration_error_naming_the_known_ones():
    with pytest.raises(ValueError, match="unknown reasoning parser 'deepseek'.*deepseek_r1"):
        extract_patch("x", reasoning_parser="deepseek")


RESPONSES = {
    "message_output_text": lambda p, d: [
        {"type": "reasoning", "id": "rs_1", "summary": [
            {"type": "summary_text", "text": f"```diff\n{d}```"}]},
        {"type": "message", "role": "assistant", "content": [
            {"type": "output_text", "text": f"Fix:\n```diff\n{p}```", "annotations": []}]}],
    "function_call_item": lambda p, d: [
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "message", "role": "assistant", "content": [
            {"type": "output_text", "text": f"Draft:\n```diff\n{d}```"}]},
        {"type": "function_call", "call_id": "c1", "name": "submit_patch",
         "arguments": json.dumps({"patch": p})}],
    "function_call_alone": lambda p, d: {"type": "function_call", "name": "submit",
                                         "arguments": json.dumps({"diff": p})},
    "claude_thinking_block": lambda p, d: [{"role": "assistant", "content": [
        {"type": "thinking", "thinking": f"```diff\n{d}```", "signature": "s"},
        {"type": "redacted_thinking", "data": "x"},
        {"type": "text", "text": f"```diff\n{p}```"}]}],
    "reasoning_content_field": lambda p, d: [{"role": "assistant",
                                              "reasoning_content": f"```diff\n{d}```",
                                              "reasoning": f"```diff\n{d}```",
                                              "content": f"```diff\n{p}```"}],
}


@pytest.mark.parametrize("shape", list(RESPONSES))
def test_responses_items_and_reasoning_fields(shape, repo, ref, partial):
    patch = extract_patch(RESPONSES[shape](ref, partial))
    assert patch == ref and applies(repo, patch) == "git_apply"


@pytest.mark.parametrize("completion", [
    # what a tool returned, and reasoning items, are never the model's answer
    lambda p: [{"type": "function_call", "name": "run_tests", "arguments": "{}"},
               {"type": "function_call_output", "call_id": "c", "output": f"```diff\n{p}```"}],
    lambda p: [{"type": "reasoning", "summary": [{"type": "summary_text", "text": p}]},
               {"type": "message", "role": "assistant", "content": [
                   {"type": "output_text", "text": "I could not fix it."}]}],
    lambda p: [{"role": "assistant", "reasoning_content": p, "content": "Nothing to change."}],
    lambda p: [{"role": "assistant", "content": [{"type": "thinking", "thinking": p}]}],
    lambda p: f"<|channel|>analysis<|message|>{p}<|end|><|start|>assistant<|channel|>final"
              "<|message|>I am not sure.<|return|>",
    lambda p: f"Here is my thought process:\n{p}",
])
def test_a_diff_only_in_reasoning_or_a_tool_output_is_no_patch(completion, ref):
    assert extract_patch(completion(ref)) is None


@pytest.mark.parametrize("completion", [
    "x" + "<|channel|>analysis<|message|>" * 40_000,      # one 1 MB line of headers
    "+ x " + "<think></think>[THINK]◁think▷" * 30_000,   # one line of every family's tags
    "+" + " " * 500_000 + "<think>" * 70_000,
    "analysis" + "assistant to=functions." * 40_000,       # decoded harmony headers
    "analysis" + ("assistant to=" + "f" * 190 + "x") * 5_000,
])
def test_one_long_line_full_of_tags_takes_linear_time(completion):
    import time

    start = time.monotonic()
    assert extract_patch(completion) is None
    assert time.monotonic() - start < 3.0


# --------------------------------------------------------------------------- the shape table

#: Shapes of ``tests/completion_shapes.py`` the extractor does not read yet -> the part of
#: the work on model output formats that makes them pass (strict: a pass is news).
PENDING: dict[str, str] = {}


def _shape_params():
    for name in completion_shapes.SHAPES:
        marks = [pytest.mark.xfail(strict=True, reason=PENDING[name])] if name in PENDING else []
        yield pytest.param(name, marks=marks, id=name)


@pytest.fixture(scope="module")
def committed(toolz_task, tmp_path_factory) -> Path:
    """A git repository of the toolz task's repo/ with its files committed."""
    work = tmp_path_factory.mktemp("committed") / "repo"
    shutil.copytree(toolz_task / "repo", work)
    git(work, "init", "-q")
    git(work, "add", "-A")
    git(work, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    return work


def result_of(repo: Path, patch: str) -> str:
    """What ``patch`` does to the committed ``repo``: ``git diff`` after applying it (then
    undone)."""
    assert git(repo, "apply", "--whitespace=nowarn", "-", data=patch.encode()).returncode == 0
    out = git(repo, "diff", "--no-color").stdout.decode()
    git(repo, "checkout", "-q", "--", ".")
    git(repo, "clean", "-qfd")
    return out


def reader(repo: Path):
    return lambda p: (repo / p).read_text() if (repo / p).is_file() else None


@pytest.mark.parametrize("name", _shape_params())
def test_every_family_s_completion_shape_gives_the_patch_its_model_meant(name, repo,
                                                                        committed):
    from proctor.rl.edit_formats import to_unified

    shape = completion_shapes.SHAPES[name]
    patch = completion_shapes.SAMPLE_PATCH
    if shape.patch_of:
        patch = shape.patch_of(patch)
    completion = shape.render(patch, completion_shapes.SAMPLE_DRAFT)
    found = find_patch(completion, reasoning_parser=shape.reasoning_parser or "auto")
    if shape.expect == "none":
        assert found.patch is None and found.edit is None
        return
    if shape.expect == "v4a":  # converted against the repository: the same change
        assert found.patch is None and found.edit is not None, found
        converted = to_unified(found.edit, reader(committed))
        assert result_of(committed, converted) == result_of(committed, patch)
        return
    assert found.patch == patch
    assert applies(repo, found.patch) == "git_apply"


# --------------------------------------------------------------------------- tool-call syntaxes


def test_a_tool_call_parser_reads_only_its_family_s_syntax(ref):
    mistral = "[TOOL_CALLS]submit_patch[ARGS]" + json.dumps({"patch": ref}) + "</s>"
    glm = f"<tool_call>submit_patch\n<arg_key>patch</arg_key>\n<arg_value>{ref}</arg_value>\n" \
          "</tool_call>"
    assert extract_patch(mistral, tool_call_parser="mistral") == ref
    assert extract_patch(glm, tool_call_parser="glm45") == ref
    assert extract_patch(mistral, tool_call_parser="glm45") is None

    assert find_patch(glm, tool_call_parser="glm45").source == "tool_call"
    assert find_patch(glm, tool_call_parser="none").source == "bare"  # read as text
    with pytest.raises(ValueError, match="unknown tool-call parser 'qwen'.*qwen3_coder"):
        extract_patch(glm, tool_call_parser="qwen")


def test_a_tool_call_whose_arguments_do_not_parse_is_no_patch_with_the_reason(ref):

    broken = '<tool_call>{"name": "submit_patch", "arguments": {"patch": "' + \
        ref.replace("\n", "\\n")[:200] + '</tool_call>'
    found = find_patch(broken)
    assert found.patch is None and found.source is None
    assert "a tool call whose JSON does not parse" in found.dropped
    assert found.why.startswith("no patch in the answer")
    # a call without a patch argument is named in the notes too
    found = find_patch('<tool_call>{"name": "run_tests", "arguments": {}}</tool_call>')
    assert found.patch is None
    assert found.dropped == ["tool call run_tests: no patch or diff argument holding a diff"]


@pytest.mark.parametrize("completion", [
    "[a(" * 300_000,
    "<function=a>" * 100_000,
    '{"name": ' * 100_000,
    "[TOOL_CALLS]" * 80_000,
    "<tool_call>a" + " " * 1_000_000,
    "<|tool_call_begin|>a" + " " * 1_000_000,
    "\n[x(a=\"" + "b" * 1_000_000,
    "<tool_call>x<arg_key>" * 100_000,
    "<｜tool▁call▁begin｜>function<｜tool▁sep｜>x\n```json\n" * 30_000,
    "<function=f>" + "<parameter=a>" * 100_000,
    '<invoke name="a">' + '<parameter name="b">' * 80_000,
])
def test_degenerate_tool_call_syntax_takes_linear_time(completion):
    import time

    start = time.monotonic()
    assert extract_patch(completion) is None
    assert time.monotonic() - start < 3.0


# --------------------------------------------------------------------------- which patch


def test_per_file_the_last_edit_wins_and_split_hunks_are_joined(repo, make_toolz_patch):

    patch = completion_shapes.SAMPLE_PATCH
    first, second = completion_shapes.split_second_hunk(patch)
    draft = completion_shapes.SAMPLE_DRAFT
    # a draft of the first hunk, then the first hunk, then the second alone (no header)
    found = find_patch(f"Try:\n```diff\n{draft}```\nNo:\n```diff\n{first}```\n"
                       f"And:\n```diff\n{second}```")
    assert found.patch == patch and found.source == "fenced"
    assert applies(repo, found.patch) == "git_apply"
    assert any("overlaps a later edit" in n for n in found.dropped), found.dropped
    assert any("joined to the file's last edit" in n for n in found.dropped), found.dropped
    # a new file given twice: the last one, whole
    one = make_toolz_patch({"toolz/extra.py": (None, "X = 1\n")}).decode()
    two = make_toolz_patch({"toolz/extra.py": (None, "X = 2\n")}).decode()
    found = find_patch(f"```diff\n{one}```\nBetter:\n{two}\nDone.")
    assert found.patch == two and found.source == "bare"
    assert found.dropped == ["toolz/extra.py: diff 1 changes the file again later: left out"]


def test_a_diff_quoted_or_indented_under_a_list_item_is_read(repo, ref):
    quoted = "".join(f"> {line}" for line in f"```diff\n{ref}```\n".splitlines(keepends=True))
    nested = "".join(f"> > {line}" for line in ref.splitlines(keepends=True))
    listed = "1. Apply:\n\n" + "".join(
        f"        {line}" for line in f"```diff\n{ref}```\n".splitlines(keepends=True))
    for completion in (quoted, nested, listed):
        assert extract_patch(completion) == ref, completion[:200]
    assert applies(repo, ref) == "git_apply"


@pytest.mark.docker
def test_edits_in_other_formats_score_like_the_diff_or_say_where_they_do_not_match(
        toolz_task, ref):
    from proctor.rl import Completion, score_completions

    v4a = completion_shapes.unified_to_v4a(ref)
    call = [{"role": "assistant", "content": None, "tool_calls": [{"function": {
        "name": "apply_patch", "arguments": json.dumps({"input": v4a})}}]}]
    stale_v4a = v4a.replace("index = index[0]", "index = index[1]")
    stale_sr = completion_shapes.unified_to_search_replace(ref).replace(
        "index = index[0]", "index = index[1]")
    assert stale_v4a != v4a and "index = index[1]" in stale_sr
    recs = score_completions([Completion(task=str(toolz_task), completion=c)
                              for c in (call, stale_v4a, stale_sr)])
    assert recs[0].reward == pytest.approx(0.998), recs[0].error
    details = recs[0].evidence["extraction"].details
    assert (details["source"], details["edit_format"]) == ("tool_call", "v4a")
    assert recs[1].reason == "did_not_apply" and recs[1].reward == 0.0
    assert "toolz/itertoolz.py, chunk 1" in recs[1].component_notes["reason"]
    assert recs[2].reason == "no_patch" and recs[2].reward == 0.0
    assert recs[2].component_notes["reason"].startswith(
        "SEARCH/REPLACE block 1: its search text is not in toolz/itertoolz.py exactly")


@pytest.mark.parametrize("text", [
    "analysis: the list branch returned a list.\n```diff\n{p}```",
    "analysis of the bug: getter unpacked its index.\n\n{p}",
    "finally, the fix:\n```diff\n{p}```",
    "final answer below.\n```diff\n{p}```",
])
def test_text_that_starts_with_a_harmony_channel_word_is_not_reasoning(text, ref):
    """Controls for decoded harmony: English that starts with ``analysis`` or ``final``
    keeps its patch under ``auto``."""
    assert extract_patch(text.format(p=ref)) == ref


@pytest.mark.parametrize("text, parser", [
    ("analysisDraft:\n```diff\n{p}```\nI ran out of time.", "auto"),
    ("analysis The list branch, draft:\n```diff\n{p}```", "openai_gptoss"),
])
def test_decoded_harmony_analysis_alone_is_reasoning(text, parser, ref):
    assert extract_patch(text.format(p=ref), reasoning_parser=parser) is None


def test_decoded_harmony_tool_call_after_a_draft_is_the_patch(ref, partial):
    """skip_special_tokens leaves ``analysis...assistant to=functions.NAMEcommentary
    json{...}``: the call is the answer, the draft before it reasoning."""
    text = (f"analysisDraft:\n```diff\n{partial}```\nassistant to=functions.submit_patch"
            f"commentary json{json.dumps({'patch': ref})}")
    found = find_patch(text)
    assert found.patch == ref and found.source == "tool_call"
    assert any("harmony analysis message" in r for r in found.reasoning)
