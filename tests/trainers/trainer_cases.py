"""What the trainer tests feed the trainers: the toolz example's patches (by file stem) and
a task directory that does not exist (Proctor answers with an error record, no reward)."""

# Reward order of the example: violation < empty < partial < reference.
PATCH_NAMES = ("reference", "empty", "partial", "violation_hidden_tests")
MISSING_TASK = "/nonexistent/proctor-task"
