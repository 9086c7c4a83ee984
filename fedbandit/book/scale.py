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

__all__ = ["SCALES", "CHAPTER_BUDGETS", "CHAPTER_CPU_BUDGETS", "BOOK_BUDGET", "BOOK_JOBS", "get_scale", "by_scale"]

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
#: seconds: the one place the chapters' experiments are designed to.  Each is 1.5 times the page's
#: slowest wall time in three cold paper-scale ``make book`` builds from fresh clones on two idle
#: cores, rounded up to 5 s (at least 15 s):
#:
#: * two on one Intel Xeon VM with AVX-512 (2026-12-07, the same code: 26 min 10 s and 27 min 15 s,
#:   49 and 52 CPU-minutes).  A VM of the same kind built that code in 17 min 18 s and 32.8
#:   CPU-minutes a few hours earlier: such hosts differ by 1.5 times from one VM to the next;
#: * one on an AMD EPYC with AVX2 (2026-12-07, 23 min 19 s, older and slower code on some pages).
#:
#: A page's wall time also depends on the page beside it: the two Intel builds paired the pages
#: differently (the order below changed) and a page moved by up to 1.5 times (02_5: 178 and 270 s),
#: more when the other page ran two worker processes (these builds let each page's grids start two
#: workers beside another page; a build now gives each one, and took 14 min 26 s on a VM where it
#: had taken 17 min 39 s, 2026-12-08: these budgets are the slower setting's).  OpenBLAS
#: single-threaded per process.  The build logs each page over its budget and writes every page's
#: time against its budget to ``_build/execution-report.json`` (CI's numbers, not the reader's: the
#: execution-status page shows the times only); ``make book`` runs the pages with the largest
#: budgets first.
CHAPTER_BUDGETS = {
    "chapters/intro": 15,  # Intel 6 and 7 s, AMD 5 s
    "chapters/01_dp20_gaps": 180,  # Intel 119 and 92 s, AMD 96 s
    "chapters/02_fixed_batch": 15,  # Intel 6 and 6 s, AMD 5 s
    "chapters/02_2_amplification": 70,  # Intel 41 and 46 s, AMD 35 s
    "chapters/02_3_leak_and_experiments": 640,  # Intel 424 and 421 s, AMD 293 s
    "chapters/02_4_scaling": 265,  # Intel 166 and 176 s, AMD 108 s
    "chapters/02_5_better_mechanisms": 410,  # Intel 178 and 270 s, AMD 166 s
    "chapters/03_consensus_ucb": 20,  # Intel 12 and 11 s, AMD 10 s
    "chapters/03_2_experiments": 585,  # Intel 344 and 390 s, AMD 350 s
    "chapters/03_3_agents_explorer": 95,  # Intel 55 and 61 s, AMD 61 s
    "chapters/04_concurrent_shuffle": 210,  # Intel 132 and 139 s, AMD 114 s
    "chapters/04_2_composition_lower_bound": 90,  # Intel 46 and 57 s, AMD 35 s
    "chapters/04_3_linear_bandits": 555,  # Intel 368 and 272 s, AMD 289 s
    "chapters/05_distributed_discrete_gaussian": 210,  # Intel 103 and 108 s, AMD 138 s
    "chapters/05_2_federated_learning": 320,  # Intel 212 and 167 s, AMD 159 s
    "chapters/05_3_flower_and_bandits": 365,  # Intel 234 and 241 s, AMD 243 s
    "chapters/06_side_by_side": 330,  # Intel 217 and 176 s, AMD 199 s
    "chapters/06_2_regret": 825,  # Intel 404 and 549 s, AMD 431 s
    "chapters/performance": 15,  # Intel 3 and 3 s, AMD 2 s
}

#: CPU-time budget of each page at paper scale, cold, in CPU-seconds: its kernel's and those of the
#: worker processes the kernel starts and waits for, as the build records them
#: (``getrusage(RUSAGE_CHILDREN)`` around each notebook).  A page's wall time depends on the page
#: beside it; its CPU time much less, now that no page starts grid workers beside another
#: (:func:`fedbandit.book.execution_cache.execute_missing` gives each notebook's grids one worker
#: on two cores: chapter 2's main configuration at T = 4,000 took 15.5 and 16.2 CPU-s alone, 15.5
#: and 15.9 with two side by side), so this budget catches a slowdown the wall-time budget's margin
#: for pairing would hide.  It does depend on the VM: two VMs of one kind differed by up to 1.46
#: times on the same code.  Each budget is 1.3 x 1.45 x the page's CPU time in one cold paper-scale
#: ``make book`` on two idle cores of an Intel Xeon VM with AVX-512 (2026-12-08: 14 min 26 s, 27.5
#: CPU-minutes; the experiment tasks took 1,026 s of CPU on that VM and 1,454 s on the slowest VM of
#: that kind, 2026-12-07), rounded up to 5 s, at least 15 s: a page over it is at least 1.3 times
#: slower than it was, on the slowest such VM measured.
CHAPTER_CPU_BUDGETS = {
    "chapters/intro": 15,  # 3.8 CPU-s
    "chapters/01_dp20_gaps": 85,  # 45.0 CPU-s
    "chapters/02_fixed_batch": 15,  # 3.2 CPU-s
    "chapters/02_2_amplification": 50,  # 25.7 CPU-s
    "chapters/02_3_leak_and_experiments": 520,  # 273.8 CPU-s
    "chapters/02_4_scaling": 205,  # 106.6 CPU-s
    "chapters/02_5_better_mechanisms": 225,  # 119.0 CPU-s
    "chapters/03_consensus_ucb": 15,  # 6.6 CPU-s
    "chapters/03_2_experiments": 345,  # 181.4 CPU-s
    "chapters/03_3_agents_explorer": 60,  # 31.3 CPU-s
    "chapters/04_concurrent_shuffle": 140,  # 72.9 CPU-s
    "chapters/04_2_composition_lower_bound": 50,  # 24.0 CPU-s
    "chapters/04_3_linear_bandits": 295,  # 155.4 CPU-s
    "chapters/05_distributed_discrete_gaussian": 95,  # 49.8 CPU-s
    "chapters/05_2_federated_learning": 150,  # 78.6 CPU-s
    "chapters/05_3_flower_and_bandits": 210,  # 110.2 CPU-s
    "chapters/06_side_by_side": 185,  # 97.9 CPU-s
    "chapters/06_2_regret": 455,  # 240.4 CPU-s
    "chapters/performance": 15,  # 1.4 CPU-s
}

#: The whole book's execution budget at paper scale, cold, on 2 cores (seconds): at most
#: ``BOOK_JOBS`` times this in chapter budgets, which run two at a time (5,215 s above, so at
#: least 43.5 minutes); the slowest measured build above executed its notebooks in 1,598 s (27 minutes).
BOOK_BUDGET = 44 * 60
