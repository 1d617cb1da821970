"""Tasks from the datasets people already have (SWE-bench-style rows), and back.

    from proctor.datasets import read_rows, RepoCache, import_row

* :mod:`proctor.datasets.swebench_rows`: rows of SWE-bench and its variants, read with
  their field names;
* :mod:`proctor.datasets.git_repos`: the rows' repositories, from checkouts or bundles on
  this machine (no network);
* :mod:`proctor.datasets.swebench_import`: a row becomes a task directory.
"""

from proctor.datasets.git_repos import GitRepo, RepoCache, RepoNotFound
from proctor.datasets.swebench_import import (
    PUBLIC_CHOICES,
    ROW_FILE,
    Imported,
    ImportOptions,
    import_row,
)
from proctor.datasets.swebench_rows import ReadRow, RowError, SWEBenchRow, read_rows

__all__ = ["PUBLIC_CHOICES", "ROW_FILE", "GitRepo", "ImportOptions", "Imported", "ReadRow",
           "RepoCache", "RepoNotFound", "RowError", "SWEBenchRow", "import_row", "read_rows"]
