"""The book's figure style and the one plotting helper every chapter uses."""

from __future__ import annotations

import matplotlib as mpl
import numpy as np

__all__ = [
    "use_book_style",
    "band",
]

BOOK_STYLE = {
    "figure.figsize": (6.4, 3.8),
    "figure.dpi": 110,
    "savefig.dpi": 110,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "legend.frameon": False,
    "font.size": 10,
}


def use_book_style() -> None:
    """Apply the book's matplotlib style (idempotent)."""
    mpl.rcParams.update(BOOK_STYLE)


def band(ax, x, mean, se, *, label=None, color=None, alpha=0.25, **line_kwargs):
    """Plot ``mean`` with a shaded ±1 standard-error band; returns the line."""
    (line,) = ax.plot(x, mean, label=label, color=color, **line_kwargs)
    ax.fill_between(x, np.asarray(mean) - se, np.asarray(mean) + se, color=line.get_color(), alpha=alpha, lw=0)
    return line
