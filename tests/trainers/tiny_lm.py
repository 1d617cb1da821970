"""A tiny causal LM built here, for the trainer tests: no hub download, seconds on a CPU.

* :func:`tiny_tokenizer`: a byte-level BPE tokenizer trained with the ``tokenizers``
  library on a few strings and wrapped in ``transformers.PreTrainedTokenizerFast``; any
  text round-trips through it (byte level), special tokens ``<s>``, ``</s>``, ``<pad>``.
* :func:`tiny_llama`: a ``LlamaForCausalLM`` with random weights (hidden size 32, one
  layer) over that tokenizer's vocabulary.
"""

from __future__ import annotations

from pathlib import Path

BOS, EOS, PAD = "<s>", "</s>", "<pad>"
CORPUS = [
    "Fix the bug in toolz.itertoolz.getter and answer with a unified diff.",
    "diff --git a/toolz/itertoolz.py b/toolz/itertoolz.py\n--- a/toolz/itertoolz.py\n"
    "+++ b/toolz/itertoolz.py\n@@ -1,3 +1,3 @@\n-    return operator.itemgetter(*index)\n"
    "+    return operator.itemgetter(index)\n",
    "```diff\n```\n def getter(index):\n    if isinstance(index, list):\n",
]


def tiny_tokenizer(texts: list[str] | None = None, vocab_size: int = 400):
    """A ``PreTrainedTokenizerFast`` trained on ``texts`` (default: :data:`CORPUS`)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[BOS, EOS, PAD],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(texts or CORPUS, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=BOS, eos_token=EOS,
                                   pad_token=PAD, padding_side="left")


def tiny_llama(tokenizer, seed: int = 0):
    """A random-weight ``LlamaForCausalLM`` sized for ``tokenizer`` (float32, CPU)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
                         max_position_embeddings=512, bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id)
    return LlamaForCausalLM(config)


def save_tiny(directory: Path, *, with_model: bool = False) -> Path:
    """Write the tokenizer (and the model, ``with_model``) to ``directory``, loadable with
    ``AutoTokenizer.from_pretrained(directory)``; returns ``directory``."""
    tokenizer = tiny_tokenizer()
    tokenizer.save_pretrained(directory)
    if with_model:
        tiny_llama(tokenizer).save_pretrained(directory)
    return directory
