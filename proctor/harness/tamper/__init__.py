"""Phase 3, tamper: the patched tree read back from the sandbox and judged before any of its
code runs: tests weakened, reference data altered, and the code scan's suspicions."""
