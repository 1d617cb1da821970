"""The README's screenshot of the report: build the report of a records file and photograph
its first screen in headless Chromium (tests/report_browser.py).

    python scripts/report_screenshot.py rewards.jsonl --rollouts rollouts.jsonl -o docs/report.png
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from proctor.report import build_report  # noqa: E402
from tests.report_browser import chromium, open_report  # noqa: E402


def main() -> None:
    """Build the report, photograph it, print the image's path."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("records", type=Path, help="reward records JSONL")
    ap.add_argument("--rollouts", type=Path, help="the batch's input, for the patches")
    ap.add_argument("-o", "--output", type=Path, default=ROOT / "docs" / "report.png")
    ap.add_argument("--width", type=int, default=1400)
    ap.add_argument("--height", type=int, default=1100)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="proctor-report-shot-") as tmp:
        done = build_report(args.records, Path(tmp) / "report.html", rollouts=args.rollouts)
        with chromium(args.width, args.height) as driver:
            opened = open_report(driver, done.path)
            if opened.ready != "1" or opened.errors:
                raise SystemExit(f"the report did not render: {opened}")
            args.output.parent.mkdir(parents=True, exist_ok=True)
            driver.save_screenshot(str(args.output))
    print(args.output)


if __name__ == "__main__":
    main()
