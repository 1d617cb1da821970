"""The path-list argument shared by the in-sandbox checkers (compile_check, static_check,
tree_report): ``--paths-from FILE`` (a JSON list the harness wrote), ``--paths-from -``
(the same on standard input; no argv size limit) or the paths themselves.

The checkers run as ``python -I`` (no script directory on ``sys.path``), so each puts its
own directory (root-owned, read-only) first before importing this module."""

import json
import sys


def read_paths(args):
    """The paths named by ``args`` (see the module docstring), as a list of str."""
    if args[:2] == ["--paths-from", "-"]:
        return json.load(sys.stdin)
    if args[:1] == ["--paths-from"]:
        with open(args[1], encoding="utf-8") as fh:
            return json.load(fh)
    return args
