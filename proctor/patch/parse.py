"""A unified diff's touched paths, read from its *headers* only (design.md section 2, phase 1).

Read twice: by ``unidiff`` and by a line scanner of our own that also sees what unidiff
misses (mode-only changes, binary patches, ``diff --git`` lines whose ``---``/``+++`` name
other paths, copies, symlinks, submodules). Hunk content is skipped by counting hunk lines,
so a comment mentioning ``conftest.py`` is never a hit. :func:`git_listed_paths` gives
git's own reading of the patch. :func:`normalise_path` and :func:`fold` are the one path
key every rule compares with.

A patch that cannot be parsed raises :class:`PatchUnparseable`: an honest failure of the
agent, scored as such, never a harness error.
"""

from __future__ import annotations

import os
import re
import subprocess
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

import unidiff

from proctor.errors import InfraError
from proctor.sandbox import host_dir

DEV_NULL = "/dev/null"
GIT_TIMEOUT_S = 60.0

#: A hunk header; groups: old start, old count, new start, new count (counts default to 1).
HUNK_HEADER = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_INDEX = re.compile(r"index [0-9a-fA-F]+\.\.[0-9a-fA-F]+(?: (\d+))?")
_MODE_HEADERS = ("old mode ", "new mode ", "new file mode ", "deleted file mode ")
_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


class PatchUnparseable(ValueError):
    """The patch text is not a diff we (or git) can read. The agent's failure, not ours."""


class PathRejected(ValueError):
    """A path that cannot be a repo-relative path (``..``, absolute, ``.git/``, empty).

    ``str(exc)`` is ``"<path>: <why>"``.
    """

    def __init__(self, path: str, why: str) -> None:
        super().__init__(f"{path}: {why}")
        self.path = path
        self.why = why


@dataclass(frozen=True)
class TouchedPath:
    """One normalised path and how the patch touches it.

    ``kind``: ``modified``, ``added``, ``deleted``, ``rename_from``, ``rename_to``,
    ``copy_from``, ``copy_to``, ``mode_change``, ``binary``, ``symlink``, ``submodule``.
    A path may appear once per kind.
    """

    path: str
    kind: str


@dataclass(frozen=True)
class PatchSummary:
    """What a patch touches, from its headers.

    ``files``: unique normalised paths, sorted. ``rejected``: ``(path, why)`` for header
    paths that failed normalisation (``..``, absolute, ``.git/``). ``added_line_numbers``:
    for each ``.py`` target file with added (``+``) lines, their target line numbers,
    sorted (the lines the patch added or changed; for mutation and static analysis).
    ``renames``: ``(old path, new path)`` of each git rename (``rename from``/``rename
    to``), sorted; static analysis compares a renamed file with its old version.
    """

    touched: tuple[TouchedPath, ...] = ()
    files: tuple[str, ...] = ()
    rejected: tuple[tuple[str, str], ...] = ()
    added_lines: int = 0
    removed_lines: int = 0
    added_line_numbers: dict[str, list[int]] = field(default_factory=dict)
    renames: tuple[tuple[str, str], ...] = ()


def fold(path: str) -> str:
    """The comparison key of a path: NFC, case-folded, NFC again (``casefold`` can denormalise)."""
    return unicodedata.normalize("NFC", unicodedata.normalize("NFC", path).casefold())


# --- paths -------------------------------------------------------------------------------


def normalise_path(raw: str, *, strip_prefix: bool = True) -> str:
    """Normalise one path from a diff header to a repo-relative POSIX path.

    Strips trailing CR, undoes git's C-quoting (``"a/t\\303\\251st.py"``), drops the one
    ``a/`` or ``b/`` diff-side prefix (when ``strip_prefix``; pass False for ``rename
    from``/``copy to`` names, git's output and task paths), collapses ``//`` and ``./``,
    applies Unicode NFC. Case is kept; compare with
    :func:`proctor.harness.integrity.forbidden.fold`.

    Raises:
        PathRejected (a ValueError): empty, absolute, a ``..`` segment, a ``.git``
            segment, or malformed quoting. design.md section 2.
    """
    path = raw.rstrip("\r")
    if path.startswith('"'):
        try:
            path, end = _take_quoted(path, 0)
        except PatchUnparseable as exc:
            raise PathRejected(raw, str(exc)) from None
        if end != len(raw.rstrip("\r")):
            raise PathRejected(raw, "text after the closing quote")
    return _normalise(path, strip_prefix)


def _normalise(path: str, strip_prefix: bool) -> str:
    """:func:`normalise_path` after unquoting."""
    if strip_prefix and path[:2] in ("a/", "b/"):
        path = path[2:]
    path = unicodedata.normalize("NFC", path)
    if not path:
        raise PathRejected(path, "empty path")
    if path.startswith("/"):
        raise PathRejected(path, "absolute path")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise PathRejected(path, "'..' escapes the repository")
    if any(fold(p) == ".git" for p in parts):
        raise PathRejected(path, "path inside .git/")
    if not parts:
        raise PathRejected(path, "empty path")
    return "/".join(parts)


def _take_quoted(s: str, start: int) -> tuple[str, int]:
    """Read a git C-quoted string starting at ``s[start] == '"'``; return (value, end)."""
    out = bytearray()
    i = start + 1
    while i < len(s):
        c = s[i]
        if c == '"':
            return out.decode("utf-8", "backslashreplace"), i + 1
        if c == "\\":
            nxt = s[i + 1 : i + 2]
            if nxt in _ESCAPES:
                out.append(_ESCAPES[nxt])
                i += 2
            elif re.fullmatch(r"[0-3][0-7]{2}", s[i + 1 : i + 4]):
                out.append(int(s[i + 1 : i + 4], 8))
                i += 4
            else:
                raise PatchUnparseable(f"bad escape in quoted path {s[start:]!r}")
        else:
            out += c.encode("utf-8", "surrogateescape")
            i += 1
    raise PatchUnparseable(f"unterminated quoted path {s[start:]!r}")


def _git_header_names(rest: str) -> list[str]:
    """Names on a ``diff --git`` line (raw, prefixes kept), a-side first.

    Unquoted names with spaces are ambiguous: like git, prefer the split whose two halves
    agree after their first component; else every split whose b-side starts with ``b/``;
    else every split. More names only make the check stricter.
    """
    if rest.startswith('"'):
        a, end = _take_quoted(rest, 0)
        tail = rest[end + 1 :]
        b = _take_quoted(tail, 0)[0] if tail.startswith('"') else tail
        return [a, b]
    q = rest.find(' "')
    if q != -1 and rest.endswith('"'):
        try:
            b, end = _take_quoted(rest, q + 1)
            if end == len(rest):
                return [rest[:q], b]
        except PatchUnparseable:
            pass
    pairs = [(rest[:i], rest[i + 1 :]) for i, c in enumerate(rest) if c == " "]
    same = [p for p in pairs if p[0].partition("/")[2] == p[1].partition("/")[2]]
    chosen = same[:1] or [p for p in pairs if p[1].startswith("b/")] or pairs
    return [name for pair in chosen for name in pair]


def _dash_name(rest: str, traditional: bool) -> list[str]:
    """Name(s) on a ``---``/``+++`` line: quoted, or up to a tab (a timestamp follows).

    Git cuts a traditional (non-git) diff's name at the first space too: add that
    reading as well.
    """
    if rest.startswith('"'):
        return [_take_quoted(rest, 0)[0]]
    name = rest.split("\t", 1)[0]
    return [name, name.split(" ", 1)[0]] if traditional and " " in name else [name]


# --- the scanner -------------------------------------------------------------------------


@dataclass
class _Block:
    """Header facts of one file in the patch."""

    git: bool
    a_names: list[str] = field(default_factory=list)  # diff-side names, old side
    b_names: list[str] = field(default_factory=list)  # diff-side names, new side
    plain: list[tuple[str, str]] = field(default_factory=list)  # (name, kind), no prefix
    modes: list[str] = field(default_factory=list)
    new_file: bool = False
    deleted: bool = False
    mode_change: bool = False
    binary: bool = False
    rename: bool = False
    copy: bool = False
    dashes: bool = False
    hunks: bool = False
    plus_name: str | None = None  # the "+++" name: where added line numbers belong
    added: list[int] = field(default_factory=list)  # target line numbers of "+" lines
    removed: int = 0


def _scan(lines: list[str], recount: bool = False) -> list[_Block]:
    """Read the headers of every file in the patch; skip hunk content by its counts.

    Raises:
        PatchUnparseable: a malformed hunk header, a hunk shorter than it says, a hunk
            with no file header, malformed quoting.
    """
    blocks: list[_Block] = []
    cur: _Block | None = None
    i, n = 0, len(lines)
    while i < n:
        line = lines[i]
        if line.startswith("diff --git "):
            cur = _Block(git=True)
            blocks.append(cur)
            names = _git_header_names(line[len("diff --git ") :])
            cur.a_names += names[0::2]
            cur.b_names += names[1::2]
        elif line.startswith("--- ") and i + 1 < n and lines[i + 1].startswith("+++ "):
            if cur is None or not cur.git or cur.dashes or cur.hunks:
                cur = _Block(git=False)
                blocks.append(cur)
            cur.dashes = True
            cur.a_names += _dash_name(line[4:], not cur.git)
            cur.b_names += (plus := _dash_name(lines[i + 1][4:], not cur.git))
            cur.plus_name = plus[0]
            i += 1
        elif line.startswith("@@"):
            if cur is None:
                raise PatchUnparseable(f"line {i + 1}: hunk without a file header")
            i = _read_hunk(lines, i, cur, recount)
            cur.hunks = True
            continue
        elif cur is not None and cur.git and not cur.dashes and not cur.hunks:
            _extended_header(cur, line)
        elif line.startswith("Binary files "):  # outside a git header: still binary
            cur = _Block(git=False, binary=True)
            blocks.append(cur)
            m = re.fullmatch(r"Binary files (.*) and (.*) differ", line)
            if m:
                cur.a_names.append(m[1])
                cur.b_names.append(m[2])
        i += 1
    return blocks


def _read_hunk(lines: list[str], i: int, cur: _Block, recount: bool = False) -> int:
    """Count the hunk whose header is ``lines[i]`` into ``cur``; return the index after it.

    Like git: an empty line is empty context; lines after a hunk whose counts are met
    are not hunk content (git ignores them too). ``recount``: the header's counts are
    ignored and the hunk's own lines counted, as ``git apply --recount`` does.
    """
    m = HUNK_HEADER.match(lines[i])
    if not m:
        raise PatchUnparseable(f"line {i + 1}: malformed hunk header {lines[i]!r}")
    old = 1 if m[2] is None else int(m[2])
    new = 1 if m[4] is None else int(m[4])
    if recount:
        old, new = _recount(lines, i + 1)
    line_no = int(m[3]) if new else int(m[3]) + 1
    i += 1
    while old > 0 or new > 0:
        if i >= len(lines):
            raise PatchUnparseable("patch ends inside a hunk (hunk shorter than its header)")
        c = lines[i][:1]
        if c in (" ", ""):
            old, new, line_no = old - 1, new - 1, line_no + 1
        elif c == "-":
            old, cur.removed = old - 1, cur.removed + 1
        elif c == "+":
            cur.added.append(line_no)
            new, line_no = new - 1, line_no + 1
        elif c != "\\":
            raise PatchUnparseable(f"line {i + 1}: hunk shorter than its header says")
        if old < 0 or new < 0:
            raise PatchUnparseable(f"line {i + 1}: hunk longer than its header says")
        i += 1
    while i < len(lines) and lines[i].startswith("\\"):
        i += 1
    return i


def _recount(lines: list[str], i: int) -> tuple[int, int]:
    """Old and new line counts of the hunk body starting at ``lines[i]``, counted the way
    git's ``recount_diff`` does: up to the next ``@@ -`` or ``diff `` line or the first line
    that is not context, removal, addition or ``\\``."""
    old = new = 0
    for line in lines[i:]:
        if line.startswith(("@@ -", "diff ")):
            break
        c = line[:1]
        if c in (" ", ""):
            old, new = old + 1, new + 1
        elif c == "-":
            old += 1
        elif c == "+":
            new += 1
        elif c != "\\":
            break
    return old, new


def _extended_header(cur: _Block, line: str) -> None:
    if line.startswith(("--- ", "+++ ")):  # a lone one: git reads (then rejects) it
        names = _dash_name(line[4:], traditional=False)
        (cur.a_names if line[0] == "-" else cur.b_names).extend(names)
        return
    for head in _MODE_HEADERS:
        if line.startswith(head):
            mode = line[len(head) :].strip()
            cur.modes.append(mode)
            cur.new_file |= head == "new file mode "
            cur.deleted |= head == "deleted file mode "
            cur.mode_change |= head in ("old mode ", "new mode ")
            return
    for head, kind in (
        ("rename from ", "rename_from"),
        ("rename to ", "rename_to"),
        ("copy from ", "copy_from"),
        ("copy to ", "copy_to"),
    ):
        if line.startswith(head):
            name = line[len(head) :]
            cur.plain.append((_take_quoted(name, 0)[0] if name.startswith('"') else name, kind))
            cur.rename |= kind.startswith("rename")
            cur.copy |= kind.startswith("copy")
            return
    m = _INDEX.fullmatch(line)
    if m and m[1]:
        cur.modes.append(m[1])
    elif line == "GIT binary patch" or line.startswith("Binary files "):
        cur.binary = True


# --- parse_patch -------------------------------------------------------------------------


class _Collector:
    def __init__(self) -> None:
        self.touched: dict[tuple[str, str], TouchedPath] = {}
        self.rejected: dict[str, tuple[str, str]] = {}

    def add(self, raw: str, kind: str, *, diff_side: bool, if_new: bool = False) -> None:
        """Add one header name. A diff-side name without an ``a/``/``b/`` prefix is
        recorded both as written and as git (``-p1``) reads it, without its first part.
        ``if_new``: skip a path already recorded under any kind."""
        raw = raw.rstrip("\r")
        if raw.startswith('"'):
            raw = _take_quoted(raw, 0)[0]  # unidiff keeps git's quoting
        if raw in ("", DEV_NULL):  # a missing name is git's error to report, not a path
            return
        variants = [(raw, diff_side)]
        if diff_side and raw[:2] not in ("a/", "b/") and "/" in raw.strip("/"):
            variants.append((raw.split("/", 1)[1], False))
        for name, strip in variants:
            try:
                path = _normalise(name, strip)
            except PathRejected as exc:
                self.rejected[str(exc)] = (exc.path, exc.why)
                continue
            if not (if_new and any(p == path for p, _ in self.touched)):
                self.touched.setdefault((path, kind), TouchedPath(path, kind))


def parse_patch(text: str, recount: bool = False) -> PatchSummary:
    """Read every path a patch's headers touch, and the added line numbers.

    ``text``: a unified diff, git format or traditional; CRLF is accepted. Empty or
    whitespace-only text gives an empty summary. Paths failing :func:`normalise_path`
    land in ``PatchSummary.rejected`` (they are violations, not parse errors).

    Raises:
        PatchUnparseable: no diff header at all, a malformed hunk header, a hunk
            shorter than its header or with a stray line, malformed quoting.
    """
    if not text.strip():
        return PatchSummary()
    lines = [ln.removesuffix("\r") for ln in text.split("\n")]
    if lines and lines[-1] == "":
        lines.pop()
    blocks = _scan(lines, recount)
    try:
        patch_set = list(unidiff.PatchSet("\n".join(lines) + "\n"))
    except unidiff.UnidiffParseError:
        # unidiff is stricter than git (it rejects "---"/"+++" lines that disagree with
        # "diff --git", and lines after a complete hunk). Our scanner, which already
        # raised on whatever git calls corrupt, has the paths: judge those.
        patch_set = []
    if not blocks and not patch_set:
        raise PatchUnparseable("no diff header found (expected 'diff --git' or '---'/'+++')")

    col = _Collector()
    added_numbers: dict[str, list[int]] = {}
    renames: set[tuple[str, str]] = set()
    for b in blocks:
        _collect_block(col, b)
        pair = _rename(b)
        if pair:
            renames.add(pair)
        if b.added and b.plus_name not in (None, DEV_NULL):
            try:
                target = normalise_path(b.plus_name)
            except PathRejected:
                continue
            if fold(target).endswith(".py"):
                added_numbers.setdefault(target, []).extend(b.added)
    for pf in patch_set:  # unidiff's names, where our scanner did not already see them
        kind = "added" if pf.is_added_file else "deleted" if pf.is_removed_file else "modified"
        col.add(pf.source_file, kind, diff_side=True, if_new=True)
        col.add(pf.target_file, kind, diff_side=True, if_new=True)

    touched = tuple(sorted(col.touched.values(), key=lambda t: (t.path, t.kind)))
    return PatchSummary(
        touched=touched,
        files=tuple(sorted({t.path for t in touched})),
        rejected=tuple(sorted(col.rejected.values())),
        added_lines=sum(len(b.added) for b in blocks),
        removed_lines=sum(b.removed for b in blocks),
        added_line_numbers={k: sorted(set(v)) for k, v in sorted(added_numbers.items())},
        renames=tuple(sorted(renames)),
    )


def _rename(b: _Block) -> tuple[str, str] | None:
    """(old, new) of a block with one ``rename from`` and one ``rename to`` line whose
    paths normalise, else None."""
    old = [n for n, k in b.plain if k == "rename_from"]
    new = [n for n, k in b.plain if k == "rename_to"]
    if not (b.rename and len(old) == len(new) == 1):
        return None
    try:
        return _normalise(old[0], False), _normalise(new[0], False)
    except PathRejected:
        return None


def _collect_block(col: _Collector, b: _Block) -> None:
    if b.rename:
        old_kind, new_kind = "rename_from", "rename_to"
    elif b.copy:
        old_kind, new_kind = "copy_from", "copy_to"
    else:
        old_kind = new_kind = "added" if b.new_file else "deleted" if b.deleted else "modified"
    for name in b.a_names:
        col.add(name, old_kind, diff_side=True)
    for name in b.b_names:
        col.add(name, new_kind, diff_side=True)
    for name, kind in b.plain:
        col.add(name, kind, diff_side=False)
    extra = [
        ("binary", b.binary),
        ("symlink", "120000" in b.modes),
        ("submodule", "160000" in b.modes),
        ("mode_change", b.mode_change),
    ]
    for kind, present in extra:
        if present:
            for name in b.a_names + b.b_names:
                col.add(name, kind, diff_side=True)
            for name, _ in b.plain:
                col.add(name, kind, diff_side=False)


# --- git's reading -----------------------------------------------------------------------


def git_listed_paths(patch: bytes, *, recount: bool = False, p0: bool = False) -> set[str]:
    """Paths ``git apply --numstat --summary -z`` reads from ``patch`` (raw, as git prints
    them: ``a/`` already stripped, not normalised; may contain ``../x`` or ``.git/...``).

    ``recount``: read it as ``git apply --recount`` does (hunk line counts ignored), the
    way the last apply fallback reads it; ``p0``: as ``git apply -p0`` does (the header
    paths as they are, for a patch without ``a/`` / ``b/`` prefixes). Includes rename and
    copy sources (parsed from the summary lines). Git runs in a fresh empty temp dir with
    ``GIT_CEILING_DIRECTORIES`` at its parent and no ``GIT_*`` variables, so no work tree
    is found (inside one, git silently drops paths outside it); the dir is removed on every
    path out. design.md section 2. Empty input gives ``set()``.

    Raises:
        PatchUnparseable: git rejects the patch (corrupt, no valid patches, ...).
        InfraError: git is missing, killed, or times out.
    """
    if not patch.strip():
        return set()
    with host_dir("integrity") as owned:
        tmp = owned / "empty"
        tmp.mkdir()
        proc = _numstat(patch, recount, tmp, p0)
    if proc.returncode < 0:
        raise InfraError(f"git apply --numstat killed by signal {-proc.returncode}")
    if proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "replace").strip()
        raise PatchUnparseable(f"git apply rejects the patch: {err}")
    return _parse_numstat_summary(proc.stdout.decode("utf-8", "backslashreplace"))


def _numstat(patch: bytes, recount: bool, cwd: Path, p0: bool = False
             ) -> subprocess.CompletedProcess:
    """``git apply --numstat --summary -z`` of ``patch`` in the empty directory ``cwd``,
    with ``GIT_CEILING_DIRECTORIES`` at its parent and no ``GIT_*`` variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_CEILING_DIRECTORIES=str(cwd.parent),
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        LC_ALL="C",
    )
    try:
        return subprocess.run(
            ["git", "apply", "--numstat", "--summary", "-z", *(["--recount"] if recount else []),
             *(["-p0"] if p0 else []),
             "-"],
            input=patch,
            cwd=cwd,
            env=env,
            capture_output=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InfraError(f"git apply --numstat failed to run: {exc}") from exc


def _parse_numstat_summary(out: str) -> set[str]:
    """``-z`` numstat records (``added\\tremoved\\tpath\\0``, new name only), then the
    summary lines; rename/copy lines (``rename a/{x => y} (90%)``) give the old names."""
    names: list[str] = []
    pos = 0
    record = re.compile(r"(?:\d+|-)\t(?:\d+|-)\t([^\0]*)\0")
    while m := record.match(out, pos):
        names.append(m[1])
        pos = m.end()
    olds: list[str] = []
    for line in out[pos:].split("\n"):
        m = re.fullmatch(r" (?:rename|copy) (.*) \(\d+%\)", line)
        if not m:
            continue
        body = m[1]
        cands = [(body[:j], body[j + 4 :]) for j in _find_all(body, " => ")]
        if body.endswith("}"):
            for i in _find_all(body, "{"):
                inner = body[i + 1 : -1]
                cands += [
                    (body[:i] + inner[:j], body[:i] + inner[j + 4 :])
                    for j in _find_all(inner, " => ")
                ]
        consistent = [old for old, new in cands if new in names]
        olds += consistent or [old for old, _ in cands]
    return set(names) | set(olds)


def _find_all(s: str, sub: str) -> list[int]:
    return [m.start() for m in re.finditer(re.escape(sub), s)]
