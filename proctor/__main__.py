"""``python -m proctor`` is the ``proctor`` command."""

from proctor.cli import app

app()
