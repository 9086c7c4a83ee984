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

#: Wall-time budget of each page at paper scale, cold (empty experiment cache), as ``make book``
#: runs it on 2 cores (two notebooks at a time, each sharing the machine with the other), in
#: seconds: the one place the chapters' experiments are designed to.  Each is the page's wall
#: time in one cold paper-scale ``make book`` from a fresh clone on two idle cores (2026-12-07,
#: AMD EPYC with AVX2, 1 MB L2 per core, OpenBLAS single-threaded per process: 23 min 19 s in all,
#: 1,373 s of notebook execution; a page that runs beside another gets about one core), times 1.5 for a
#: machine 1.5 times slower, rounded up to 5 s (at least 15 s).  The execution-status page reports
#: each page's measured time against its budget; ``make book`` runs the pages with the largest
#: budgets first.
CHAPTER_BUDGETS = {
    "chapters/intro": 15,  # 5 s
    "chapters/01_dp20_gaps": 145,  # 96 s
    "chapters/02_fixed_batch": 15,  # 5 s
    "chapters/02_2_amplification": 55,  # 35 s
    "chapters/02_3_leak_and_experiments": 440,  # 293 s
    "chapters/02_4_scaling": 165,  # 108 s
    "chapters/02_5_better_mechanisms": 250,  # 166 s
    "chapters/03_consensus_ucb": 15,  # 10 s
    "chapters/03_2_experiments": 530,  # 350 s
    "chapters/03_3_agents_explorer": 95,  # 61 s
    "chapters/04_concurrent_shuffle": 175,  # 114 s
    "chapters/04_2_composition_lower_bound": 55,  # 35 s
    "chapters/04_3_linear_bandits": 435,  # 289 s
    "chapters/05_distributed_discrete_gaussian": 210,  # 138 s
    "chapters/05_2_federated_learning": 240,  # 159 s
    "chapters/05_3_flower_and_bandits": 365,  # 243 s
    "chapters/06_side_by_side": 300,  # 199 s
    "chapters/06_2_regret": 650,  # 431 s
    "chapters/performance": 15,  # 2 s
}

#: The whole book's execution budget at paper scale, cold, on 2 cores (seconds): at most
#: ``BOOK_JOBS`` times this in chapter budgets, which run two at a time.  The chapters' measured
#: times (above) add up to 2,739 s, 23 minutes of execution two at a time.
BOOK_BUDGET = 35 * 60
