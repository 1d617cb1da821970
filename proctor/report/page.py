"""Write the report as one self-contained HTML file: the page's script and style, Plotly's
JavaScript inlined (no CDN: it opens offline), and the figures of
:func:`proctor.report.figures.report_data` as gzip-compressed JSON the page inflates with
the browser's own ``DecompressionStream``."""

from __future__ import annotations

import base64
import gzip
import json
from importlib import resources
from pathlib import Path
from typing import Any

from proctor.version import __version__


class ReportDependencyError(RuntimeError):
    """The report's libraries (the ``report`` extra: plotly, jinja2) are not installed."""


def _asset(name: str) -> str:
    return resources.files("proctor.report").joinpath("page", name).read_text("utf-8")


def _libraries() -> tuple[Any, str]:
    try:
        import jinja2
        from plotly.offline import get_plotlyjs
    except ImportError as exc:
        raise ReportDependencyError(
            f"the report needs the report extra (pip install 'proctor[report]'): {exc}"
        ) from None
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    return env.from_string(_asset("report.html.j2")), get_plotlyjs()


def live_page() -> str:
    """The HTML of ``proctor serve``'s live page (``GET /``): no library, it polls
    ``/v1/live`` every 2 s and redraws in place."""
    return _asset("live.html")


def check_dependencies() -> None:
    """Raise :class:`ReportDependencyError` now when the report could not be written later
    (``proctor batch --report`` checks before it scores anything)."""
    _libraries()


def pack(data: dict[str, Any]) -> str:
    """``data`` as the page embeds it: JSON, gzip (mtime 0, so the same data gives the same
    bytes), base64."""
    raw = json.dumps(data, separators=(",", ":"), allow_nan=False, default=str).encode()
    return base64.b64encode(gzip.compress(raw, compresslevel=6, mtime=0)).decode("ascii")


def render(data: dict[str, Any]) -> str:
    """The HTML text of the report for ``data`` (:func:`~proctor.report.figures.report_data`,
    optionally with ``compare`` and ``source`` keys added).

    Raises:
        ReportDependencyError: plotly or jinja2 is missing.
    """
    template, plotly_js = _libraries()
    return template.render(title=data.get("title", "Proctor report"), version=__version__,
                           style=_asset("report.css"), script=_asset("report.js"),
                           plotly_js=plotly_js, payload=pack(data))


def write(data: dict[str, Any], out: Path) -> int:
    """Write the report of ``data`` to ``out`` (its folder created); returns its size in
    bytes. Written to a temporary name, then renamed: a reader never sees half a file.

    Raises:
        ReportDependencyError: plotly or jinja2 is missing.
        OSError: ``out`` cannot be written.
    """
    text = render(data).encode("utf-8", "backslashreplace")
    out = Path(out)
    tmp = out.with_name(f".{out.name}.tmp")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(text)
        tmp.replace(out)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise OSError(exc.errno, exc.strerror, str(out)) from None
    return len(text)
