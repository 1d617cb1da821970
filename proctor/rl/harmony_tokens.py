"""gpt-oss completions read from their token ids by ``openai-harmony``'s own parser.

A trainer that hands Proctor a completion's token ids as well as its text (TRL passes
``completion_ids``) gets its harmony messages split by the library that defines the format,
which reads special tokens as tokens: exact where the decoded text is ambiguous (a
``<|channel|>`` typed inside a diff line decodes like a real header; decoded without special
tokens, the headers are only words glued to the text). The text reader of
:mod:`proctor.rl.reasoning` reads everything else, and reads the same messages from the text
(``tests/test_rendered_completions.py`` checks both against completions the library
renders).

The ids are read by the library only when all of these hold; otherwise
:func:`harmony_messages` returns None and the text reader decides:

* ``openai-harmony`` is installed (``pip install 'proctor[harmony]'``) and the
  ``o200k_base`` vocabulary is on this machine: in ``TIKTOKEN_ENCODINGS_BASE`` when that
  names a local directory, else the copy in the ``bpe-openai`` wheel (the library checks
  its sha256). Nothing is ever downloaded;
* the ids hold harmony's message tokens, and decode (by the harmony encoding) to exactly
  the text given, with or without their special tokens: ids of another tokenizer, or a
  text changed after decoding, are not trusted;
* the library parses them (a malformed sequence is left to the text reader).
"""

from __future__ import annotations

import functools
import gzip
import importlib.util
import os
import tempfile
import threading
from pathlib import Path

#: What :attr:`proctor.rl.reasoning.Answer.reader` says when the library split the messages.
LIBRARY = "openai-harmony"
_VOCAB = "o200k_base.tiktoken"
_LOCK = threading.Lock()




@functools.cache
def _encoding():
    """(library module, gpt-oss encoding), or None: the library or its vocabulary is not
    on this machine. Loaded once per process."""
    if importlib.util.find_spec("openai_harmony") is None:
        return None
    with _LOCK:
        base = os.environ.get("TIKTOKEN_ENCODINGS_BASE")
        if not (base and (Path(base) / _VOCAB).is_file()):
            base = _vocab_from_wheel()
        if base is None:
            return None
        before = os.environ.get("TIKTOKEN_ENCODINGS_BASE")
        os.environ["TIKTOKEN_ENCODINGS_BASE"] = base
        try:
            import openai_harmony as h

            return h, h.load_harmony_encoding(h.HarmonyEncodingName.HARMONY_GPT_OSS)
        except Exception:  # noqa: BLE001 - a vocabulary it refuses: the text reader reads
            return None
        finally:
            if before is None:
                os.environ.pop("TIKTOKEN_ENCODINGS_BASE", None)
            else:
                os.environ["TIKTOKEN_ENCODINGS_BASE"] = before


def _vocab_from_wheel() -> str | None:
    """A directory holding ``o200k_base.tiktoken`` decompressed from the ``bpe-openai``
    wheel (a per-user cache directory), or None without the wheel."""
    spec = importlib.util.find_spec("bpe_openai")
    if spec is None or not spec.submodule_search_locations:
        return None
    packed = Path(next(iter(spec.submodule_search_locations))) / "data" / f"{_VOCAB}.gz"
    if not packed.is_file():
        return None
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "proctor" / \
        "tiktoken"
    try:
        cache.mkdir(parents=True, exist_ok=True)
        if not (cache / _VOCAB).is_file():
            with tempfile.NamedTemporaryFile(dir=cache, delete=False) as tmp:
                tmp.write(gzip.decompress(packed.read_bytes()))
            os.replace(tmp.name, cache / _VOCAB)
    except OSError:
        return None
    return str(cache)


def available() -> bool:
    """Can this process read harmony token ids with the library?"""
    return _encoding() is not None


def harmony_messages(text: str, token_ids) -> list[tuple[str, str | None, str]] | None:
    """The harmony messages of a completion as ``(channel, recipient or None, body)``, in
    order, read by ``openai-harmony`` from ``token_ids`` (a sequence of ints), or None when
    the module docstring's conditions do not all hold. Never raises."""
    loaded = _encoding()
    if loaded is None or not token_ids:
        return None
    h, enc = loaded
    try:
        ids = [int(t) for t in token_ids]
        special = [t for t in ids if enc.is_special_token(t)]
        if not special:
            return None
        plain = [t for t in ids if not enc.is_special_token(t)]
        if text not in (enc.decode_utf8(ids), enc.decode_utf8(plain)):
            return None
        start = enc.encode("<|start|>", allowed_special="all")
        role = None if ids[:len(start)] == start else h.Role.ASSISTANT
        parsed = enc.parse_messages_from_completion_tokens(ids, role)
    except Exception:  # noqa: BLE001 - not harmony's ids, or malformed: the text reader reads
        return None
    return [(m.channel or "", m.recipient or None,
             "".join(getattr(part, "text", "") or "" for part in m.content))
            for m in parsed]
