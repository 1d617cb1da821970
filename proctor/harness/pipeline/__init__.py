"""Scoring one patch. :mod:`~proctor.harness.pipeline.score` runs the phases top-down
(integrity, baseline, sandbox, measure, reward) under the per-patch deadline, the sandbox
slots and cancellation; :mod:`~proctor.harness.pipeline.sandboxes` holds the two sandboxes,
:mod:`~proctor.harness.pipeline.measure` the measure steps and
:mod:`~proctor.harness.pipeline.outcomes` how a record ends. The workspace and suite
modules lay the repository, patch and hidden tests into a sandbox and run the suites
there."""
