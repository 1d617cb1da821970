"""Phase 1, integrity: the patch's diff headers judged against the forbidden paths (the
task's and the defaults), ``pyproject.toml`` judged per section, and new top-level modules
that would shadow installed ones. Decided from headers before anything is copied. Also the
host's scans of the added lines: secrets (a gate blocker) and added lint or mutation
suppressions (a flag)."""
