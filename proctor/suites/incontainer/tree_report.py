"""Hash every file of a tree (ignored files included, ``.git/`` at its top excluded) and copy
the text of chosen changed files; write one JSON report.

``python -I -S -B tree_report.py ROOT OUT_JSON|- [PATH...]`` (``-``: print the report),
as the sandbox user, right after
``git apply`` and before any code of the patch runs. Report: ``{"hashes": {path: digest},
"texts": {path: text or null}}``; ``texts`` holds the text of each PATH that is a
regular file (UTF-8, else its declared encoding, else UTF-8 with replacement characters;
null only when it cannot be read). A digest is ``sha256(content)`` hex plus ``:x``
when executable; a symlink is ``link:<target>``.
Also imported by the host (:func:`hash_tree`) to hash the pristine repo the same way.
"""

import hashlib
import json
import os
import stat
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from paths_arg import read_paths  # noqa: E402

SKIP_DIRS = ("__pycache__",)
SKIP_SUFFIXES = (".pyc", ".pyo")


def digest(path):
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        return "link:" + os.readlink(path)
    if not stat.S_ISREG(st.st_mode):
        return "special:" + oct(stat.S_IFMT(st.st_mode))
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest() + (":x" if st.st_mode & 0o100 else "")


def hash_tree(root, skip_compiled=False):
    """Relative POSIX path -> digest for every non-directory entry under ``root``.

    ``skip_compiled``: leave out ``__pycache__`` and ``*.pyc``/``*.pyo`` (what the sandbox
    copy of a host repo leaves out). A symlink to a directory is an entry, not followed.
    Iterative (an explicit stack, not ``os.walk``, which recurses once per level: a tree
    1,100 levels deep makes it raise RecursionError); unreadable directories are
    skipped as ``os.walk`` did."""
    out = {}
    stack = [("", root)]
    while stack:
        rel_dir, path = stack.pop()
        try:
            with os.scandir(path) as it:
                entries = list(it)
        except OSError:
            continue
        for entry in entries:
            try:
                is_dir = entry.is_dir()  # follows symlinks, as os.walk's split did
            except OSError:
                is_dir = False
            if is_dir and ((not rel_dir and entry.name == ".git")
                           or (skip_compiled and entry.name in SKIP_DIRS)):
                continue
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            if is_dir and not entry.is_symlink():
                stack.append((rel, entry.path))
                continue
            if skip_compiled and entry.name.endswith(SKIP_SUFFIXES):
                continue
            out[rel] = digest(entry.path)
    return out


def source_text(data):
    """Text of a source file: UTF-8, else its declared (PEP 263) encoding, else UTF-8 with
    replacement characters. Never raises for content: a scan must always get text."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    try:
        import io
        import tokenize

        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return data.decode(encoding, "replace")
    except (SyntaxError, LookupError):
        return data.decode("utf-8", "replace")


def main(argv):
    root, out_path, wanted = argv[1], argv[2], read_paths(argv[3:])
    hashes = hash_tree(root)
    texts = {}
    for rel in wanted:
        if not hashes.get(rel, "link:").startswith(("link:", "special:")):
            try:
                with open(os.path.join(root, rel), "rb") as fh:
                    texts[rel] = source_text(fh.read())
            except OSError:
                texts[rel] = None
    report = json.dumps({"hashes": hashes, "texts": texts})
    if out_path == "-":
        sys.stdout.write(report)
        return
    os.makedirs(os.path.dirname(out_path), mode=0o755, exist_ok=True)
    with open(out_path, "w", encoding="utf-8") as fh:
        fh.write(report)


if __name__ == "__main__":
    main(sys.argv)
