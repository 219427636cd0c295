"""bench --plot's chart: its legend under the axis label, never over it (issue 44, point 10)."""

from __future__ import annotations

import pytest

from jaxcache.report.bench import plot


def test_the_legend_sits_under_the_axis_label():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 2.8), dpi=120)
    for i, name in enumerate(("start-up", "import jax", "trace", "lower", "compile", "rest")):
        ax.barh("cold", 0.3, left=0.3 * i, label=name)
    ax.set_xlabel("seconds (bars: median per phase)")
    legend = plot._legend_under_label(fig, ax)
    fig.canvas.draw()
    box = legend.get_window_extent()
    label = ax.xaxis.label.get_window_extent()
    assert box.y1 <= label.y0, (box, label)  # wholly below the label: no overlap
    plt.close(fig)
