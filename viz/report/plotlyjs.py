"""The plotting library a report page inlines: plotly.js's basic bundle (bar, scatter, pie traces), once.

plotly.py inlines its full plotly.js (about 4.8 MB, every trace type) into each page; the report draws
only bars and lines, so it ships plotly.js's own partial bundle `plotly-basic.min.js` (npm package
`plotly.js-basic-dist-min`, MIT, `assets/plotly-basic.LICENSE`; about 1.2 MB) and inlines that once
per page, in its head. The figure JSON plotly.py writes must match the library's version, so the
bundle is used only when its version is the one plotly.py ships; otherwise the page falls back to
plotly.py's full bundle (still offline, only larger) rather than draw with a mismatched library.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

BUNDLE = Path(__file__).with_name("assets") / "plotly-basic.min.js"
_VERSION = re.compile(r"plotly\.js \(basic - minified\) v(\S+)")


def bundle_version() -> str:
    """The plotly.js version of the shipped basic bundle, read from its banner."""
    match = _VERSION.search(BUNDLE.read_text(encoding="utf-8")[:300])
    if match is None:
        raise RuntimeError(f"{BUNDLE}: no plotly.js basic-bundle banner in its first lines")
    return match.group(1)


@cache
def library() -> str:
    """The JavaScript every page inlines once: the basic bundle, or plotly.py's full bundle when
    plotly.py was built against another plotly.js version."""
    import plotly.offline

    if bundle_version() == plotly.offline.get_plotlyjs_version():
        return BUNDLE.read_text(encoding="utf-8")
    return plotly.offline.get_plotlyjs()


def head_script() -> str:
    """The `<script>` elements for the page's head (MathJax off, as plotly.py's own pages set it)."""
    return f"<script>window.PlotlyConfig = {{MathJaxConfig: 'local'}};</script><script>{library()}</script>"
