"""The README's trainer snippets, as the tests run them.

A snippet is the fenced code block that follows an HTML comment ``<!-- snippet: NAME -->``
in README.md (blank lines may stand between them). Names in use: ``trl``, ``verl-config``,
``openrlhf-file``, ``openrlhf-http``. The tests execute these blocks (or
parse them, for YAML and shell), so what the README shows is what runs.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"
RL_DIR = Path(__file__).resolve().parents[2] / "proctor" / "rl"
_MARKER = re.compile(r"^<!--\s*snippet:\s*(?P<name>[\w.-]+)\s*-->[ \t]*$", re.M)
_FENCE = re.compile(r"\s*^(?P<fence>`{3,}|~{3,})(?P<lang>[^\n]*)\n(?P<body>.*?)^(?P=fence)[ \t]*$",
                    re.M | re.S)


class SnippetMissing(LookupError):
    """README.md has no ``<!-- snippet: NAME -->`` marker followed by a fenced block."""


@dataclass(frozen=True)
class Snippet:
    """One README code block: its marker name, fence language tag, body text and the
    1-based README line its body starts on."""

    name: str
    lang: str
    code: str
    line: int


def snippets(readme: Path = README) -> dict[str, Snippet]:
    """Every marked snippet of ``readme`` by name. Raises ValueError when a marker is not
    followed by a fenced block or a name is used twice."""
    text = readme.read_text(encoding="utf-8")
    out: dict[str, Snippet] = {}
    for m in _MARKER.finditer(text):
        name = m["name"]
        fence = _FENCE.match(text, m.end())
        if fence is None:
            line = text.count("\n", 0, m.start()) + 1
            raise ValueError(f"{readme}:{line}: marker '{name}' is not followed by a fenced "
                             "code block")
        if name in out:
            raise ValueError(f"{readme}: snippet '{name}' is marked twice")
        out[name] = Snippet(name, fence["lang"].strip(), fence["body"],
                            text.count("\n", 0, fence.start("body")) + 1)
    return out


def snippet(name: str, readme: Path = README) -> Snippet:
    """The snippet called ``name``; raises :class:`SnippetMissing` when there is none."""
    found = snippets(readme)
    if name not in found:
        raise SnippetMissing(f"README.md has no '<!-- snippet: {name} -->' marker before a "
                             f"code block (markers found: {sorted(found) or 'none'})")
    return found[name]


def localise(code: str) -> str:
    """The snippet with its placeholder paths made real: ``/path/to/proctor/rl/`` becomes
    this checkout's ``proctor/rl/``."""
    return code.replace("/path/to/proctor/rl/", f"{RL_DIR}/")


def run_python(name: str, namespace: dict) -> dict:
    """Execute the Python snippet ``name`` in ``namespace`` (the names it expects, e.g.
    ``model`` or ``dataset``), compiled under its README line so tracebacks point there.
    Returns the namespace."""
    snip = snippet(name)
    if snip.lang not in ("python", "py"):
        raise ValueError(f"snippet '{name}' is {snip.lang or 'untagged'}, not python")
    code = compile("\n" * (snip.line - 1) + localise(snip.code), str(README), "exec")
    exec(code, namespace)  # noqa: S102 - the README's own code, on purpose
    return namespace


def shell_words(name: str) -> list[list[str]]:
    """The shell snippet ``name`` as commands: one list of words per command line
    (comments dropped, backslash continuations joined)."""
    snip = snippet(name)
    joined = localise(snip.code).replace("\\\n", " ")
    return [words for line in joined.splitlines()
            if (words := shlex.split(line, comments=True))]


def option(words: list[str], flag: str) -> str:
    """The value after ``flag`` in a command's words; raises LookupError without one."""
    for i, word in enumerate(words):
        if word == flag and i + 1 < len(words):
            return words[i + 1]
        if word.startswith(flag + "="):
            return word.split("=", 1)[1]
    raise LookupError(f"no {flag} in {' '.join(words)}")
