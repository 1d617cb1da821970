"""Scoring one patch: ``score`` (in :mod:`proctor.harness.pipeline.score`) runs the phases
in order inside the sandboxes it opens, under the per-patch deadline, the sandbox slots and
cancellation; the workspace and suite modules lay the repository, patch and hidden tests
into a sandbox and run the suites there."""
