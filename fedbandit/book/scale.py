"""The book's single scale knob.

Chapters read ``FEDBANDIT_SCALE`` through :func:`get_scale` only: ``quick``
(seconds per chapter, used by the tests) or ``paper`` (the papers' settings,
used by ``make book``).  When ``FEDBANDIT_SCALE_LOG`` names a file, every call
appends the resolved scale to it, so the test suite can check (the "canary")
that no notebook under test ran at paper scale.
"""

from __future__ import annotations

import os
from typing import TypeVar

__all__ = ["SCALES", "CHAPTER_BUDGETS", "BOOK_BUDGET", "BOOK_JOBS", "get_scale", "by_scale"]

#: The values of ``FEDBANDIT_SCALE``: ``quick`` (seconds per chapter) or ``paper`` (the papers' settings).
SCALES = ("quick", "paper")
DEFAULT_SCALE = "paper"

T = TypeVar("T")


def get_scale() -> str:
    """Return the scale the book runs at, from ``FEDBANDIT_SCALE``.

    Returns
    -------
    str
        ``"quick"`` or ``"paper"`` (the default when the variable is unset or empty).

    Raises
    ------
    ValueError
        If the variable holds any other value.
    """
    raw = os.environ.get("FEDBANDIT_SCALE", "").strip().lower()
    scale = raw or DEFAULT_SCALE
    if scale not in SCALES:
        raise ValueError(
            f"FEDBANDIT_SCALE must be one of {SCALES!r} (or unset for {DEFAULT_SCALE!r}), "
            f"got {os.environ.get('FEDBANDIT_SCALE')!r}"
        )
    log = os.environ.get("FEDBANDIT_SCALE_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(f"{os.getpid()} {scale}\n")
    return scale


def by_scale(*, quick: T, paper: T) -> T:
    """Pick the setting for the current scale: ``by_scale(quick=200, paper=10_000)``."""
    return quick if get_scale() == "quick" else paper


#: Notebooks ``make book`` executes at a time (``python -m fedbandit.book.execution_cache --execute``,
#: the Makefile's ``JOBS``): two chapters share the two cores.
BOOK_JOBS = 2

#: Wall-time budget of each chapter at paper scale, cold (empty experiment cache), as ``make book``
#: runs it on 2 cores (two notebooks at a time, each sharing the machine with the other), in
#: seconds: the one place the chapters' experiments are designed to.  Each is the chapter's CPU
#: time measured at paper scale (user + sys of the kernel and its workers; a chapter that runs
#: beside another gets about one core, so its wall time is about its CPU time), times 1.5 for a
#: machine 1.5 times slower, rounded up.  The execution-status page reports each chapter's
#: measured time against its budget.
CHAPTER_BUDGETS = {
    "chapters/intro": 15,
    "chapters/01_dp20_gaps": 60,
    # chapter 2 (540 s in all), split by the pages' share of its compute: the paper's Fig. 2a/2b (M = 100, T = 10^4,
    # 25 runs), the regret cost of the private variant and Fig. 2c (T = 25 000, 25 runs) in full are on page 3
    "chapters/02_fixed_batch": 15,
    "chapters/02_2_amplification": 45,
    "chapters/02_3_leak_and_experiments": 330,
    "chapters/02_4_scaling": 90,
    "chapters/02_5_better_mechanisms": 60,
    # chapter 3 (180 s in all), split by the pages' compute (estimated from the quick pages' cells scaled to paper
    # scale): the opener's Monte Carlo of the hybrid mechanism (20x its quick size) and its audit (10x), the main
    # grid, and the agents sweep (up to M = 100, consensus cost ~ M^2 per slot) with the explorer's grid
    "chapters/03_consensus_ucb": 20,
    "chapters/03_2_experiments": 125,
    "chapters/03_3_agents_explorer": 35,
    # chapter 4 (240 s) split by its pages' share of the compute (estimated from which sweeps moved where)
    "chapters/04_concurrent_shuffle": 60,
    "chapters/04_2_composition_lower_bound": 60,
    "chapters/04_3_linear_bandits": 120,
    # chapter 5's 240 s split by each page's paper-scale CPU, estimated as one grid point's measured CPU times
    # the points: the opener's mean-estimation grid, the federated-learning grid, Flower and the bandit grid
    "chapters/05_distributed_discrete_gaussian": 80,
    "chapters/05_2_federated_learning": 100,
    "chapters/05_3_flower_and_bandits": 60,
    # chapter 6's 240 s split by the pages' estimated paper-scale CPU (one grid point and one end-to-end audit
    # measured at paper scale, times their counts): the audits of every pair (opener), the sweeps (second page)
    "chapters/06_side_by_side": 125,
    "chapters/06_2_regret": 115,
    "chapters/performance": 15,
}

#: The whole book's execution budget at paper scale, cold, on 2 cores (seconds): at most
#: ``BOOK_JOBS`` times this in chapter budgets, which run two at a time.
BOOK_BUDGET = 30 * 60
