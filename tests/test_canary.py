"""Canary: the notebooks under test must have run at quick scale.

``make test`` runs nbval with ``FEDBANDIT_SCALE=quick`` and
``FEDBANDIT_SCALE_LOG`` pointing to a file; every call of
:func:`fedbandit.book.scale.get_scale` in a notebook kernel appends the scale it
resolved.  This test (``make canary``) fails if any kernel ran at paper scale, or if a
chapter notebook never asked for its scale.
"""

import os
from pathlib import Path

import pytest

CHAPTERS = sorted((Path(__file__).resolve().parents[1] / "chapters").glob("*.ipynb"))


def test_notebooks_ran_at_quick_scale():
    log = os.environ.get("FEDBANDIT_SCALE_LOG")
    if not log or not Path(log).exists():
        if os.environ.get("FEDBANDIT_CANARY_REQUIRED") == "1":
            pytest.fail(f"no scale log at {log!r}: the notebooks did not run under nbval")
        pytest.skip("FEDBANDIT_SCALE_LOG not set: run through `make test`")
    entries = [line.split() for line in Path(log).read_text().splitlines() if line.strip()]
    scales = {scale for _, scale in entries}
    kernels = {pid for pid, _ in entries}
    assert scales == {"quick"}, f"notebooks under test ran at scales {sorted(scales)}; expected only 'quick'"
    assert len(kernels) >= len(CHAPTERS), (
        f"only {len(kernels)} kernels asked for their scale, but there are {len(CHAPTERS)} chapter notebooks"
    )


def test_every_chapter_reads_the_scale_knob():
    for nb in CHAPTERS:
        assert "get_scale()" in nb.read_text(encoding="utf-8"), f"{nb.name} never calls fedbandit.book.scale.get_scale()"
