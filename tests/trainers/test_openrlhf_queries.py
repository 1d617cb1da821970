"""OpenRLHF queries built the way OpenRLHF 0.11 builds them (``SingleTurnAgentExecutor``:
``tokenizer(prompt, add_special_tokens=False)``, the prompt ids cut from the left when too
long, then ``tokenizer.decode(prompt_ids + response_ids, skip_special_tokens=False)``) with
a real tokenizer trained here: the response is found and its patch extracted (the query
ends in ```` ```<|im_end|> ````), never the example diff of the prompt.

Needs ``tokenizers`` and ``transformers`` (skipped otherwise; both come with verl or
OpenRLHF: run from such a venv, e.g. ``/path/to/venv/bin/python -m pytest
tests/test_openrlhf_queries.py``).
"""

from __future__ import annotations

import pytest

pytest.importorskip("tokenizers", reason="tokenizers is not importable in this python")
pytest.importorskip("transformers", reason="transformers is not importable in this python")

from proctor.rl import extract_patch  # noqa: E402
from proctor.rl.openrlhf import response_of  # noqa: E402

EXAMPLE = ("diff --git a/demo.py b/demo.py\n--- a/demo.py\n+++ b/demo.py\n@@ -1 +1 @@\n"
           "-x = 1\n+x = 2\n")


@pytest.fixture(scope="module")
def tokenizer(toolz_patches):
    """Byte-level BPE with ChatML special tokens (decodes exactly: a prompt cut from the
    left is what makes the query differ from prompt + response)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=500, special_tokens=[
        "<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([p.decode() for p in toolz_patches.values()] + [EXAMPLE], trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>")


def chat_prompt(user: str) -> str:
    return (f"<|im_start|>system\nAnswer with a diff , like this one :\n```diff\n{EXAMPLE}```"
            f"<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n")


def openrlhf_query(tokenizer, prompt: str, response: str, max_prompt_tokens: int | None = None
                   ) -> str:
    prompt_ids = tokenizer(text=prompt, add_special_tokens=False)["input_ids"]
    if max_prompt_tokens is not None:
        prompt_ids = prompt_ids[-max_prompt_tokens:]
    response_ids = tokenizer(text=response, add_special_tokens=False)["input_ids"]
    return tokenizer.decode(prompt_ids + response_ids + [tokenizer.eos_token_id],
                            skip_special_tokens=False)


def cut_inside_the_example(tokenizer, prompt: str) -> int:
    """A prompt length in tokens whose left cut falls inside the example diff's hunk."""
    ids = tokenizer(text=prompt, add_special_tokens=False)["input_ids"]
    return next(k for k in range(1, len(ids)) if "+x = 2" in tokenizer.decode(ids[-k:])
                and "@@" not in tokenizer.decode(ids[-k:]))


@pytest.mark.parametrize("cut", [None, 40, "inside_example"])
def test_patch_of_the_response_not_of_the_prompt(tokenizer, toolz_patches, cut):
    ref = toolz_patches["reference"].decode()
    prompt = chat_prompt("Fix toolz.itertoolz.getter , please .")
    if cut == "inside_example":
        cut = cut_inside_the_example(tokenizer, prompt)
    query = openrlhf_query(tokenizer, prompt, f"The fix:\n```diff\n{ref}```", cut)
    assert query.startswith(prompt) == (cut is None) and query.endswith("```<|im_end|>")
    assert extract_patch(response_of(query, prompt)) == ref
    no_answer = openrlhf_query(tokenizer, prompt, "I am not sure .", cut)
    assert extract_patch(response_of(no_answer, prompt)) is None
