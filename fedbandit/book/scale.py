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
    # a chapter split into pages keeps its budget (540, 180, 240, 240, 240 s), shared among its pages in
    # proportion to their cold paper-scale times in one build (2026-12-06, two loaded cores), so that make book
    # runs the longest pages first; those times are still over these budgets (the book is to get faster)
    "chapters/02_fixed_batch": 15,
    "chapters/02_2_amplification": 15,
    "chapters/02_3_leak_and_experiments": 355,
    "chapters/02_4_scaling": 45,
    "chapters/02_5_better_mechanisms": 110,
    "chapters/03_consensus_ucb": 15,
    "chapters/03_2_experiments": 145,
    "chapters/03_3_agents_explorer": 20,
    "chapters/04_concurrent_shuffle": 60,
    "chapters/04_2_composition_lower_bound": 15,
    "chapters/04_3_linear_bandits": 165,
    "chapters/05_distributed_discrete_gaussian": 60,
    "chapters/05_2_federated_learning": 80,
    "chapters/05_3_flower_and_bandits": 100,
    "chapters/06_side_by_side": 145,
    "chapters/06_2_regret": 95,
    "chapters/performance": 15,
}

#: The whole book's execution budget at paper scale, cold, on 2 cores (seconds): at most
#: ``BOOK_JOBS`` times this in chapter budgets, which run two at a time.
BOOK_BUDGET = 30 * 60
