"""The report: one self-contained HTML file (plots, a rollout table with drill-downs, a
comparison of two runs) from reward-records JSONL. Reads records only; scores nothing."""

from __future__ import annotations

from proctor.report.build import (
    EmptyRecordsError,
    ReportInputError,
    ReportResult,
    build_report,
    patches_of,
    printable,
)
from proctor.report.figures import compare_data, group_figures, report_data, verdict_of
from proctor.report.page import ReportDependencyError, check_dependencies, live_page
from proctor.report.records_file import RecordsFile, read_records

__all__ = [
    "EmptyRecordsError", "RecordsFile", "ReportDependencyError", "ReportInputError",
    "ReportResult", "printable",
    "build_report", "check_dependencies", "compare_data", "group_figures", "live_page",
    "patches_of",
    "read_records", "report_data", "verdict_of",
]
