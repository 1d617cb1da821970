"""Completions rendered by the model families' own tokenizers, not written by hand.

* **gpt-oss** (harmony): ``openai-harmony`` renders the conversation to tokens exactly as
  the model is trained on it; the completion is the tokens after the prompt's
  ``<|start|>assistant``, decoded with its special tokens (OpenRLHF, vLLM's text with
  ``skip_special_tokens=False``) and without (TRL, verl's default decode). The library's
  own parse of the same tokens is the oracle for :func:`proctor.rl.reasoning.answer`:
  the same answer text and the same tool calls.
* **Mistral**: ``mistral-common`` encodes an assistant turn with tool calls or a fenced
  diff with every tokenizer it ships (SentencePiece v2, v3, v7; Tekken v3, v7); the
  completion is the tokens after the last ``[/INST]``, decoded as ``transformers`` does
  (special tokens kept as their text, the runs between them decoded) and with special
  tokens skipped.

Each completion must give the patch its model meant, which ``git apply`` takes against the
toolz example. The harmony vocabulary (``o200k_base``) comes from the ``bpe-openai``
wheel, checked against the hash the harmony library expects, so nothing is downloaded.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import shutil
from pathlib import Path

import pytest

from proctor.rl import find_patch
from proctor.rl.reasoning import answer
from tests import completion_shapes
from tests.test_extract_patch import applies, git

PATCH = completion_shapes.SAMPLE_PATCH
DRAFT = completion_shapes.SAMPLE_DRAFT
FORBIDDEN = completion_shapes.FORBIDDEN_DIFF


@pytest.fixture(scope="module")
def repo(toolz_task, tmp_path_factory) -> Path:
    """A git copy of the toolz task's repo/ (what the apply step patches)."""
    work = tmp_path_factory.mktemp("rendered") / "repo"
    shutil.copytree(toolz_task / "repo", work)
    git(work, "init", "-q")
    return work


def fenced(body: str) -> str:
    return f"```diff\n{body}```"


# =========================================================================== harmony (gpt-oss)


@pytest.fixture(scope="module")
def harmony(tmp_path_factory):
    """openai-harmony's gpt-oss encoding, its vocabulary read from the bpe-openai wheel."""
    vocab = tmp_path_factory.mktemp("tiktoken")
    # Found, not imported: the data file is all that is used of the package.
    package = Path(importlib.util.find_spec("bpe_openai").submodule_search_locations[0])
    packed = package / "data" / "o200k_base.tiktoken.gz"
    (vocab / "o200k_base.tiktoken").write_bytes(gzip.decompress(packed.read_bytes()))
    before = os.environ.get("TIKTOKEN_ENCODINGS_BASE")
    os.environ["TIKTOKEN_ENCODINGS_BASE"] = str(vocab)
    try:
        import openai_harmony as h
        # The library checks the file's sha256 against o200k_base's published one.
        yield h, h.load_harmony_encoding(h.HarmonyEncodingName.HARMONY_GPT_OSS)
    finally:
        if before is None:
            os.environ.pop("TIKTOKEN_ENCODINGS_BASE", None)
        else:
            os.environ["TIKTOKEN_ENCODINGS_BASE"] = before


def _harmony_turns(h) -> dict[str, tuple[list, str | None]]:
    """name -> (the assistant's messages, the patch the model meant or None)."""
    say = h.Message.from_role_and_content
    a = h.Role.ASSISTANT

    def analysis(text):
        return say(a, text).with_channel("analysis")

    def final(text):
        return say(a, text).with_channel("final")

    def call(name, args, channel="commentary"):
        return (say(a, json.dumps(args)).with_channel(channel)
                .with_recipient(f"functions.{name}").with_content_type("<|constrain|>json"))

    read = {"path": "toolz/itertoolz.py"}
    return {
        "draft_in_analysis_then_final": (
            [analysis(f"Draft:\n{fenced(DRAFT)}\nThe list branch is wrong."),
             final(f"The fix:\n{fenced(PATCH)}")], PATCH),
        "forbidden_path_in_analysis_then_final": (
            [analysis(f"Shortcut:\n{fenced(FORBIDDEN)}\nNo, fix the code."),
             final(f"{fenced(PATCH)}")], PATCH),
        "analysis_then_tool_call": (
            [analysis(f"Draft:\n{fenced(DRAFT)}"), call("submit_patch", {"patch": PATCH})],
            PATCH),
        "read_then_preamble_then_tool_call": (
            [analysis("Read the file first."), call("read_file", read),
             say(a, "Submitting the fix now.").with_channel("commentary"),
             call("apply_diff", {"path": "toolz/itertoolz.py", "diff": PATCH})], PATCH),
        "tool_call_on_the_analysis_channel": (
            [analysis(f"Draft:\n{fenced(DRAFT)}"),
             call("submit_patch", {"patch": PATCH}, channel="analysis")], PATCH),
        "bare_diff_in_final_after_prose": (
            [analysis("Both branches must return tuples."),
             final(f"Here is the patch.\n\n{PATCH}")], PATCH),
        "draft_only_in_analysis": (
            [analysis(f"Draft:\n{fenced(DRAFT)}\nI ran out of time.")], None),
    }


def _render_harmony(h, enc, messages) -> list[int]:
    """The completion's tokens: the whole conversation rendered for training, less the
    prompt the model was given (which ends in ``<|start|>assistant``)."""
    user = [h.Message.from_role_and_content(h.Role.USER, "Fix getter in toolz.")]
    prompt = enc.render_conversation_for_completion(h.Conversation.from_messages(user),
                                                    h.Role.ASSISTANT)
    # Analysis kept: the library drops it before a final message by default, as a prompt
    # of the next turn would; the completion itself has it.
    whole = enc.render_conversation_for_training(h.Conversation.from_messages(user + messages),
                                                 h.RenderConversationConfig(
                                                     auto_drop_analysis=False))
    assert whole[:len(prompt)] == prompt
    return whole[len(prompt):]


HARMONY_TURNS = ["draft_in_analysis_then_final", "forbidden_path_in_analysis_then_final",
                 "analysis_then_tool_call", "read_then_preamble_then_tool_call",
                 "tool_call_on_the_analysis_channel", "bare_diff_in_final_after_prose",
                 "draft_only_in_analysis"]


@pytest.mark.parametrize("name", HARMONY_TURNS)
@pytest.mark.parametrize("decode", ["special_tokens_kept", "special_tokens_skipped"])
def test_harmony_rendered_by_openai_harmony(harmony, name, decode, repo):
    h, enc = harmony
    messages, meant = _harmony_turns(h)[name]
    tokens = _render_harmony(h, enc, messages)
    if decode == "special_tokens_skipped":
        tokens = [t for t in tokens if not enc.is_special_token(t)]
    text = enc.decode_utf8(tokens)
    for parser in ("auto", "openai_gptoss"):
        found = find_patch(text, reasoning_parser=parser)
        assert found.patch == meant, (text, found)
    if meant is not None:
        assert applies(repo, meant) == "git_apply"


@pytest.mark.parametrize("name", HARMONY_TURNS)
def test_harmony_answer_agrees_with_the_library_s_parse(harmony, name):
    """Proctor's harmony reader and openai-harmony's parser split the same completion into
    the same answer text and the same tool calls."""
    h, enc = harmony
    tokens = _render_harmony(h, enc, _harmony_turns(h)[name][0])
    parsed = enc.parse_messages_from_completion_tokens(tokens, h.Role.ASSISTANT)
    calls, kept = [], []
    for message in parsed:
        body = "".join(part.text for part in message.content)
        if message.recipient and message.recipient.startswith("functions."):
            calls.append({"name": message.recipient[len("functions."):], "arguments": body})
        elif message.channel == "final" or (message.channel == "commentary"
                                            and not message.recipient):
            kept.append(body)
    ours = answer(enc.decode_utf8(tokens), "openai_gptoss")
    assert ours.calls == calls
    assert ours.text == "\n".join(kept)


@pytest.mark.parametrize("name", HARMONY_TURNS)
@pytest.mark.parametrize("decode", ["special_tokens_kept", "special_tokens_skipped"])
def test_harmony_token_ids_are_read_by_the_library(harmony, name, decode):
    """Given the token ids too (TRL's ``completion_ids``), openai-harmony splits the
    messages, the record says so, and the patch is the one the text reader finds."""
    h, enc = harmony
    messages, meant = _harmony_turns(h)[name]
    tokens = _render_harmony(h, enc, messages)
    text = enc.decode_utf8(tokens if decode == "special_tokens_kept"
                           else [t for t in tokens if not enc.is_special_token(t)])
    found = find_patch(text, token_ids=tokens)
    assert found.patch == meant
    assert found.details()["reasoning_reader"] == "openai-harmony"
    assert find_patch(text).details().get("reasoning_reader") is None


def test_harmony_ids_that_do_not_decode_to_the_text_are_not_trusted(harmony):
    """Ids of another completion (or of another tokenizer) leave the text to the text
    reader: the patch is the text's own."""
    h, enc = harmony
    messages, meant = _harmony_turns(h)["draft_in_analysis_then_final"]
    other, _ = _harmony_turns(h)["draft_only_in_analysis"]
    text = enc.decode_utf8(_render_harmony(h, enc, messages))
    for ids in (_render_harmony(h, enc, other), [1, 2, 3], ["x"], []):
        found = find_patch(text, token_ids=ids)
        assert found.patch == meant
        assert "reasoning_reader" not in found.details()


def test_trl_passes_completion_ids_to_the_library(harmony, tmp_path, monkeypatch):
    """TRL's reward function hands ``completion_ids`` on: a gpt-oss completion whose text
    was decoded without special tokens is read from its tokens. (The task does not exist:
    its error record comes at once; what is checked is the patch the extraction found.)"""
    from proctor.rl import completions
    from proctor.rl.trl import make_reward_func

    h, enc = harmony
    messages, meant = _harmony_turns(h)["analysis_then_tool_call"]
    tokens = _render_harmony(h, enc, messages)
    text = enc.decode_utf8([t for t in tokens if not enc.is_special_token(t)])
    seen = []
    real = completions.find_patch

    def spy(*args, **kwargs):
        seen.append(found := real(*args, **kwargs))
        return found

    monkeypatch.setattr(completions, "find_patch", spy)
    rewards = make_reward_func()(prompts=["p"], completions=[text], completion_ids=[tokens],
                                 task=[str(tmp_path / "no-task")])
    assert rewards == [None]
    assert [f.patch for f in seen] == [meant]
    assert seen[0].details()["reasoning_reader"] == "openai-harmony"


# =========================================================================== Mistral


def _mistral_tokenizers() -> list[str]:
    import mistral_common

    data = Path(mistral_common.__file__).parent / "data"
    # tokenizer.model.v1 has no tool calls.
    return sorted(p.name for p in data.iterdir() if p.name != "tokenizer.model.v1")


@pytest.fixture(scope="module")
def mistral():
    import mistral_common
    from mistral_common.protocol.instruct.validator import ValidationMode
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

    data = Path(mistral_common.__file__).parent / "data"
    cache: dict[str, object] = {}

    def load(name: str):
        if name not in cache:  # finetuning mode: the last message may be the assistant's
            cache[name] = MistralTokenizer.from_file(data / name,
                                                     mode=ValidationMode.finetuning)
        return cache[name]
    return load


def _mistral_turns() -> dict[str, tuple[dict, str]]:
    """name -> (the assistant message's fields, the patch it means)."""
    read = {"path": "toolz/itertoolz.py"}
    return {
        "tool_calls_read_then_submit": (
            {"tool_calls": [("read_file", read), ("submit_patch", {"patch": PATCH})]}, PATCH),
        "one_tool_call_with_a_diff_argument": (
            {"tool_calls": [("apply_diff", {"path": "toolz/itertoolz.py", "diff": PATCH})]},
            PATCH),
        "fenced_diff_in_the_content": (
            {"content": f"The list branch returned a list.\n\n{fenced(PATCH)}\n"}, PATCH),
        "draft_then_corrected_fence": (
            {"content": f"First:\n{fenced(DRAFT)}\nCorrected:\n{fenced(PATCH)}"}, PATCH),
    }


def _render_mistral(tokenizer, fields: dict) -> tuple[list[int], object]:
    from mistral_common.protocol.instruct.messages import AssistantMessage, UserMessage
    from mistral_common.protocol.instruct.request import ChatCompletionRequest
    from mistral_common.protocol.instruct.tool_calls import Function, FunctionCall, Tool, ToolCall

    calls = [ToolCall(id=f"call{i:05d}", function=FunctionCall(name=n, arguments=json.dumps(a)))
             for i, (n, a) in enumerate(fields.get("tool_calls", []))]
    reply = (AssistantMessage(tool_calls=calls) if calls
             else AssistantMessage(content=fields["content"]))
    tools = [Tool(function=Function(name=n, description=n, parameters={
        "type": "object", "properties": {k: {"type": "string"} for k in keys}}))
        for n, keys in [("read_file", ["path"]), ("submit_patch", ["patch"]),
                        ("apply_diff", ["path", "diff"])]]
    request = ChatCompletionRequest(messages=[UserMessage(content="Fix getter in toolz."), reply],
                                    tools=tools)
    tokens = tokenizer.encode_chat_completion(request).tokens
    raw = tokenizer.instruct_tokenizer.tokenizer
    ends = [i for i, t in enumerate(tokens)
            if raw.is_special(t) and raw.id_to_piece(t) == "[/INST]"]
    return tokens[ends[-1] + 1:], raw


def _decode_kept(raw, tokens: list[int]) -> str:
    """Special tokens as their text, the runs between them decoded (``transformers``'
    ``decode(skip_special_tokens=False)``)."""
    from mistral_common.tokens.tokenizers.base import SpecialTokenPolicy

    out, run = [], []
    for t in tokens:
        if raw.is_special(t):
            out.append(raw.decode(run, special_token_policy=SpecialTokenPolicy.IGNORE))
            out.append(raw.id_to_piece(t))
            run = []
        else:
            run.append(t)
    out.append(raw.decode(run, special_token_policy=SpecialTokenPolicy.IGNORE))
    return "".join(out)


@pytest.mark.parametrize("tokenizer", _mistral_tokenizers())
@pytest.mark.parametrize("name", list(_mistral_turns()))
@pytest.mark.parametrize("decode", ["special_tokens_kept", "special_tokens_skipped"])
def test_mistral_rendered_by_mistral_common(mistral, tokenizer, name, decode, repo):
    from mistral_common.tokens.tokenizers.base import SpecialTokenPolicy

    fields, meant = _mistral_turns()[name]
    tokens, raw = _render_mistral(mistral(tokenizer), fields)
    text = (_decode_kept(raw, tokens) if decode == "special_tokens_kept"
            else raw.decode(tokens, special_token_policy=SpecialTokenPolicy.IGNORE))
    for parser in ("auto", "mistral"):
        found = find_patch(text, tool_call_parser=parser, reasoning_parser=parser)
        assert found.patch == meant, (text, found)
    assert applies(repo, meant) == "git_apply"

