"""Secrets in the lines a patch adds: a hard blocker of the gate verdict (design.md section 3).

Two detectors, both on added lines only (what the base already had is not the agent's):

* **detect-secrets** (Yelp, maintained): its pattern plugins for private keys and cloud /
  API tokens (AWS, GitHub, GitLab, Slack, Stripe, OpenAI, PyPI, npm, JWT, basic-auth URLs
  ...). Its generic high-entropy and keyword plugins are left out: on code they fire on
  URLs and hashes.
* **Our keyword rule**: a string literal of at least 12 characters with Shannon entropy of
  at least 3.5 bits per character, containing letters and digits, assigned to a name like
  ``password`` / ``token`` / ``secret`` / ``api_key``; plus two token shapes the library
  misses (``sk-...`` style API keys, Google ``AIza...`` keys).

Findings never contain the secret: only path, line, the detector's type and a redacted
preview. Plugins are instantiated directly (no detect-secrets global settings), so scanning
is thread-safe.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from functools import lru_cache

from proctor.patch import AddedLine

#: detect-secrets plugins not used (noisy on code; see the module docstring).
_SKIPPED_PLUGINS = frozenset(
    {"Base64HighEntropyString", "HexHighEntropyString", "KeywordDetector", "IPPublicDetector"}
)
_KEYWORD_ASSIGNMENT = re.compile(
    r"""(?ix)
    (?P<name>[\w.\-]*(?:passw(?:or)?d|pwd|secret|token|api[_-]?key|apikey|access[_-]?key
        |private[_-]?key|auth[_-]?key|credentials?)[\w\-]*)
    ['"]?\]?\s*(?::=|=|:|=>)\s*[rbuf]{0,2}(?P<q>['"])(?P<value>[^'"\s]{12,})(?P=q)
    """
)
_TOKEN_SHAPES = {
    "API key (sk-...)": re.compile(r"\bsk-(?:proj-|ant-|live-)?[A-Za-z0-9_\-]{32,}"),
    "Google API key": re.compile(r"\bAIza[0-9A-Za-z_\-]{35}\b"),
}
MIN_ENTROPY_BITS = 3.5
MIN_SECRET_LENGTH = 12


def shannon_entropy(value: str) -> float:
    """Shannon entropy of ``value`` in bits per character (0.0 for an empty string)."""
    if not value:
        return 0.0
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values())


#: A secret-like name whose last part says the value is something else: ``token_url``,
#: ``api_key_header``, ``credentials_path``, ``TOKEN_ALPHABET``... (honest code; each was a
#: hard gate blocker).
_NOT_A_SECRET_NAME = re.compile(
    r"(?i)[_.\-](?:url|uri|endpoint|path|file|filename|dir|header|field|name|param|re|regex"
    r"|pattern|alphabet|chars|charset|type|prefix|format|env|var|length|len)$")
#: A relative or absolute file path with an extension: ``config/creds_v2.json``.
_FILE_PATH = re.compile(r"[\w.\-]*(?:/[\w.\-]+)+\.[A-Za-z0-9]{1,5}")


def _looks_secret(value: str, name: str = "") -> bool:
    if _NOT_A_SECRET_NAME.search(name) or "://" in value or _FILE_PATH.fullmatch(value):
        return False  # a URL (basic-auth ones are detect-secrets'), a path, a header name
    return (len(value) >= MIN_SECRET_LENGTH
            and shannon_entropy(value) >= MIN_ENTROPY_BITS
            and any(c.isdigit() for c in value) and any(c.isalpha() for c in value)
            and not any(c in value for c in "{}<>$%"))  # templates and placeholders


def _random_token(value: str) -> bool:
    """Generated keys have digits, and mix cases or are one unbroken run (``sk-`` + 32 hex
    digits); ``sk-learn-compatible-wrapper`` (words joined by hyphens) is neither."""
    body = re.sub(r"^(?:sk-(?:proj-|ant-|live-)?|AIza)", "", value)
    mixed = any(c.isupper() for c in body) and any(c.islower() for c in body)
    return any(c.isdigit() for c in body) and (mixed or "-" not in body)


@lru_cache(maxsize=1)
def _plugins() -> tuple:
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    classes: list[type] = list(get_mapping_from_secret_type_to_class().values())
    return tuple(c() for c in classes if c.__name__ not in _SKIPPED_PLUGINS)


def preload() -> None:
    """Load detect-secrets' plugins now rather than at the first patch (a process that forks
    scorers, like the CLI daemon, then loads them once for all of them)."""
    _plugins()


def _redact(text: str) -> str:
    return text[:2] + "…" if len(text) > 2 else "…"


def find_secrets(lines: list[AddedLine]) -> list[dict]:
    """Secrets in ``lines``: ``[{"path", "line", "type", "preview"}]`` in input order, one
    entry per (line, type). ``preview`` is the first two characters of the secret and an
    ellipsis. Lines longer than 4000 characters are scanned on their first 4000 only."""
    found: list[dict] = []
    for a in lines:
        text = a.text[:4000]
        hits: dict[str, str] = {}
        for plugin in _plugins():
            for s in plugin.analyze_line(filename=a.path, line=text, line_number=a.line):
                hits.setdefault(s.type, s.secret_value or "")
        for kind, rx in _TOKEN_SHAPES.items():
            m = next((m for m in rx.finditer(text) if _random_token(m.group(0))), None)
            if m:
                hits.setdefault(kind, m.group(0))
        for m in _KEYWORD_ASSIGNMENT.finditer(text):
            if _looks_secret(m.group("value"), m.group("name")):
                hits.setdefault("High-entropy value assigned to a secret name",
                                m.group("value"))
        for kind, value in hits.items():
            found.append({"path": a.path, "line": a.line, "type": kind,
                          "preview": _redact(value)})
    return found
