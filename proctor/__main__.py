"""``python -m proctor`` is the ``proctor`` command."""

from proctor.launcher import main

main()
