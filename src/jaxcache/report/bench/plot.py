"""`jaxcache bench --plot F.png`: median time per phase, cold vs warm, and the spread of the
whole process over the runs (needs matplotlib). The title says what is drawn; the verdict is
the text's and the report's."""

from __future__ import annotations

import io

from jaxcache.bench.sample import PHASE_LABELS
from jaxcache.bench.trials import BenchResult
from jaxcache.errors import JaxcacheError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any  # matplotlib's figures: the package is optional and untyped here


def render(result: BenchResult) -> bytes:
    """The chart as PNG bytes, marked as jaxcache's (outputs.png_from_jaxcache recognizes it)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise JaxcacheError("--plot needs matplotlib: pip install 'jaxcache[plot]'") from None
    a = result.analysis
    if not a.phases:
        raise JaxcacheError("nothing to plot: no completed cold and warm runs")
    fig, ax = plt.subplots(figsize=(8, 2.8), dpi=120)
    left = {"cold": 0.0, "warm": 0.0}
    colors = ["#9e9e9e", "#5c6bc0", "#26a69a", "#8d6e63", "#ef5350", "#ffca28"]
    for (name, (c, w)), color in zip(a.phases.items(), colors, strict=True):
        for arm, spread in (("cold", c), ("warm", w)):
            ax.barh(arm, spread.median, left=left[arm], color=color,
                    label=PHASE_LABELS[name] if arm == "cold" else None)
            left[arm] += spread.median
    if a.wall is not None:  # the whole process over the runs: min, median, max
        for arm, spread in zip(("cold", "warm"), a.wall, strict=True):
            ax.errorbar(spread.median, arm, fmt="o", color="black", markersize=3, capsize=4,
                        xerr=[[spread.median - spread.low], [spread.high - spread.median]],
                        label="whole process: min, median, max" if arm == "cold" else None)
    ax.invert_yaxis()
    ax.set_xlabel("seconds (bars: median per phase)")
    cold = sum(1 for s in result.samples if s.kind == "cold")
    warm = sum(1 for s in result.samples if s.kind == "warm")
    ax.set_title(f"time per start, cold vs warm ({cold} cold, {warm} warm runs)", fontsize=9)
    _legend_under_label(fig, ax)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": "jaxcache bench"}, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def _legend_under_label(fig: Any, ax: Any) -> Any:
    """The legend under the axis label, never over it: placed below the label's own box (the
    figure is saved with bbox_inches="tight", so it grows to hold the legend)."""
    fig.tight_layout()
    fig.canvas.draw()
    label = ax.xaxis.label.get_window_extent().transformed(fig.transFigure.inverted())
    return fig.legend(fontsize=7, ncol=3, loc="upper center",
                      bbox_to_anchor=(0.5, label.y0 - 0.02), bbox_transform=fig.transFigure,
                      frameon=False)
