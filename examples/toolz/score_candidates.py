"""Score every candidate patch of the toolz example task; one line per patch.

    python examples/toolz/score_candidates.py examples/toolz/build/task

Exits 1 if the rewards are not in the expected order: violation < empty < partial <
reference, and the comment-only patch equal to the reference.
"""

from __future__ import annotations

import sys
from pathlib import Path

from proctor import score

ORDER = ["violation_hidden_tests", "empty", "partial", "reference", "comment_mentions_hidden"]


def main(task_dir: str) -> int:
    patches = Path(task_dir).parent / "patches"
    rewards = {}
    for name in ORDER:
        rec = score(task_dir, (patches / f"{name}.patch").read_bytes(), rollout_id=name)
        if rec.status == "error":
            print(f"{name:<26} error    {rec.error.kind}: {rec.error.message}")
            return 3
        rewards[name] = rec.reward
        why = rec.reason or "measured"
        print(f"{name:<26} reward {rec.reward:+.4f}  {rec.verdict.gate:<4}  ({why}, "
              f"{rec.timing['total_s']:.1f}s)")
    ok = (rewards["violation_hidden_tests"] < rewards["empty"] < rewards["partial"]
          < rewards["reference"] and rewards["comment_mentions_hidden"] == rewards["reference"])
    print("order violation < empty < partial < reference, comment == reference:",
          "OK" if ok else "WRONG")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "examples/toolz/build/task"))
