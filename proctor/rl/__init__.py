"""RL helpers: group advantages, patch extraction from completions, trainer adapters.

    from proctor.rl import group_advantages, extract_patch
    from proctor.rl.verl import compute_score        # verl 0.9: reward.custom_reward_function
    from proctor.rl.trl import make_reward_func      # TRL GRPOTrainer
    proctor/rl/openrlhf.py                           # OpenRLHF file mode (--reward.remote_url)

``extract_patch`` rules: :mod:`proctor.rl.extract` (reasoning of every model family:
:mod:`proctor.rl.reasoning`; tool-call syntaxes: :mod:`proctor.rl.tool_calls`).

The adapters import their framework lazily (torch for OpenRLHF only if installed);
``import proctor.rl`` needs none of them.
"""

from proctor.rl.advantages import group_advantages, is_flagged
from proctor.rl.completions import (
    NO_PATCH,
    Completion,
    completion_text,
    no_patch_record,
    score_completions,
)
from proctor.rl.extract import Extraction, extract_patch, find_patch
from proctor.rl.reasoning import REASONING_PARSERS
from proctor.rl.tool_calls import TOOL_CALL_PARSERS

__all__ = ["NO_PATCH", "REASONING_PARSERS", "TOOL_CALL_PARSERS", "Completion", "Extraction",
           "completion_text", "extract_patch", "find_patch", "group_advantages", "is_flagged",
           "no_patch_record", "score_completions"]
