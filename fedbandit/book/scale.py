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
#: seconds: the one place the chapters' experiments are designed to.  Each is 1.25 times the page's
#: slower wall time in two cold paper-scale ``make book`` builds from fresh clones on two idle cores,
#: rounded up to 5 s (at least 15 s):
#:
#: * Intel Xeon with AVX-512 (2026-12-07, 26 min 10 s in all, 49 CPU-minutes; a VM of the same kind
#:   built the same code in 17 min 18 s and 32.8 CPU-minutes a few hours earlier: such hosts differ
#:   by 1.5 times from one VM to the next, so budgets derived from the fast one false-alarm on the
#:   slow one);
#: * AMD EPYC with AVX2 (2026-12-07, 23 min 19 s in all, older and slower code on some pages).
#:
#: OpenBLAS single-threaded per process; a page that runs beside another gets about one core.  The
#: build logs each page over its budget and writes every page's time against its budget to
#: ``_build/execution-report.json`` (CI's numbers, not the reader's: the execution-status page
#: shows the times only); ``make book`` runs the pages with the largest budgets first.
CHAPTER_BUDGETS = {
    "chapters/intro": 15,  # Intel 6 s, AMD 5 s
    "chapters/01_dp20_gaps": 150,  # Intel 119 s, AMD 96 s
    "chapters/02_fixed_batch": 15,  # Intel 6 s, AMD 5 s
    "chapters/02_2_amplification": 55,  # Intel 41 s, AMD 35 s
    "chapters/02_3_leak_and_experiments": 530,  # Intel 424 s, AMD 293 s
    "chapters/02_4_scaling": 210,  # Intel 166 s, AMD 108 s
    "chapters/02_5_better_mechanisms": 225,  # Intel 178 s, AMD 166 s
    "chapters/03_consensus_ucb": 15,  # Intel 12 s, AMD 10 s
    "chapters/03_2_experiments": 440,  # Intel 344 s, AMD 350 s
    "chapters/03_3_agents_explorer": 80,  # Intel 55 s, AMD 61 s
    "chapters/04_concurrent_shuffle": 165,  # Intel 132 s, AMD 114 s
    "chapters/04_2_composition_lower_bound": 60,  # Intel 46 s, AMD 35 s
    "chapters/04_3_linear_bandits": 465,  # Intel 368 s, AMD 289 s
    "chapters/05_distributed_discrete_gaussian": 175,  # Intel 103 s, AMD 138 s
    "chapters/05_2_federated_learning": 265,  # Intel 212 s, AMD 159 s
    "chapters/05_3_flower_and_bandits": 305,  # Intel 234 s, AMD 243 s
    "chapters/06_side_by_side": 275,  # Intel 217 s, AMD 199 s
    "chapters/06_2_regret": 540,  # Intel 404 s, AMD 431 s
    "chapters/performance": 15,  # Intel 3 s, AMD 2 s
}

#: The whole book's execution budget at paper scale, cold, on 2 cores (seconds): at most
#: ``BOOK_JOBS`` times this in chapter budgets, which run two at a time.  The chapters' slower
#: measured times (above) add up to 3,153 s, 26 minutes of execution two at a time.
BOOK_BUDGET = 35 * 60
