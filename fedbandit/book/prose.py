"""Numbers in a chapter's prose come from the code that ran: glue them, never type them.

A chapter computes a result in a code cell and calls :func:`glue_number` (or
:func:`glue_text`); its markdown then quotes it with myst-nb's role
``{glue:md}`name```, so the rendered sentence always shows the value of the run
that built the page (quick scale on Binder and in the tests, paper scale in the
published book).  The formatting lives next to the computation, in one place.
Use ``{glue:md}`` (not ``{glue:text}``, which re-parses the text as a Python literal,
so that "12,345" would render as a tuple).

:func:`typed_results` is the rule the book's tests apply to every markdown cell: a
number with a decimal point, a percentage, or an integer of four or more digits,
standing in prose (outside math, code, roles, links, headings and citation years),
is a result typed by hand unless it names a place in a paper ("Theorem 6.1") or
states a threshold that an assert checks ("within 0.1"); in a table row every number
counts, integers included (tables quote measurements: generate them in code).  Parameters of the
experiment are written as math (``$\\varepsilon = 0.5$``) or glued too.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Iterator

__all__ = ["glue_number", "glue_text", "typed_results"]


class _Text:
    """A value whose plain-text and markdown displays are one preformatted string."""

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text

    def _repr_markdown_(self) -> str:
        return self.text


class _Glued(str):
    """The glued text, returned to the cell: as a cell's last expression it displays nothing
    (the prose shows it where it is quoted), yet it prints and formats as the plain string."""

    def _ipython_display_(self) -> None:
        pass


def _glue(name: str, text: str) -> str:
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z][A-Za-z0-9_\-]*", name):
        raise ValueError(
            f"name must be a glue key (a letter, then letters, digits, '_' or '-'), got {name!r}"
        )
    try:
        from IPython import get_ipython
        from myst_nb import glue
    except ImportError:  # outside the book's environment: nothing to render into
        return _Glued(text)
    if get_ipython() is None:  # a plain Python session or a test: nothing to render into
        return _Glued(text)
    glue(name, _Text(text), display=False)
    return _Glued(text)


def glue_number(name: str, value, fmt: str = ".2f") -> str:
    """Render a computed number into the chapter's prose as ``{glue:md}`name```.

    Parameters
    ----------
    name : str
        The glue key, unique within the notebook.
    value : real number (Python or NumPy scalar, or a 0-d array)
        The computed value.
    fmt : str, default ``".2f"``
        A format specification (``".3g"``, ``",d"``, ``".0%"``, ...).

    Returns
    -------
    str
        The formatted text, so that a cell can also print it.

    Raises
    ------
    TypeError
        If ``value`` is not a real number.
    ValueError
        If ``value`` is not finite (a NaN in prose is a bug upstream), or ``fmt`` does not
        apply to a number.
    """
    if hasattr(value, "shape") and getattr(value, "shape", None) == ():
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"value must be a real number, got {type(value).__name__} {value!r}")
    if not math.isfinite(float(value)):
        raise ValueError(f"value must be finite to be quoted in prose, got {value!r} for {name!r}")
    if isinstance(value, numbers.Integral):
        value = int(value)
    else:
        value = float(value)
    try:
        text = format(value, fmt)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"fmt must be a format specification for a number, got {fmt!r}: {exc}") from None
    return _glue(name, text)


def glue_text(name: str, text: str) -> str:
    """Render computed text (a list of names, a range "0.2–0.3", a verdict) into prose.

    Parameters
    ----------
    name : str
        The glue key, unique within the notebook.
    text : str
        The text, built from computed values by the caller.

    Returns
    -------
    str
        ``text``.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return _glue(name, text)


# --- the typed-result rule ----------------------------------------------------------

_MATH = re.compile(r"\$\$.*?\$\$|\$[^$\n]+\$", re.S)
_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"\]\([^)]*\)|\{[a-z:\-]+\}`[^`]*`|<[^>]+>|\[[^\]]*\]\{[^}]*\}")
_FENCE = re.compile(r"^(```|:::).*?^(```|:::)\s*$", re.S | re.M)
_NUM = re.compile(r"(?<![\w.])(\d+\.\d+%?|\d+%|\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d{4,})(?![\w.])")
# An integer after "≈", "about", "roughly", "around", or in a list "36 / 23 / 5", is a
# measurement too.
_APPROX_INT = re.compile(r"(?:≈|~|\babout |\broughly |\baround )\s*(\d+)(?![\w.,])|(?<![\w.])(\d+)(?= / \d)|(?<=\d / )(\d+)(?![\w.])")
# In a table row every number is a result (integers too): tables quote measurements.
_TABLE_NUM = re.compile(r"(?<![\w.])(\d+(?:[.,]\d+)*%?)(?![\w.])")
_YEAR = re.compile(r"^(19|20)\d\d$")
# A number that names a place in a paper, or a version.
_REF = re.compile(
    r"(Theorem|Lemma|Corollary|Example|Section|Sec\.|§|Fig\.|Figure|Figs\.|Proposition|Prop\.|"
    r"Eq\.|Equation|Algorithm|Alg\.|Appendix|Fact|Remark|Definition|Table|Chapter|version|"
    r"Python|v)\s*$"
)
# A number that states a threshold an assert checks.
_BOUND = re.compile(
    r"(within|at least|at most|above|below|slack|margin|threshold|tolerance|than|under|over|"
    r"[<>≤≥]|up to|false-alarm rate of|confidence)\s*$",
    re.I,
)


def typed_results(markdown: str) -> Iterator[tuple[str, str]]:
    """Yield ``(number, line)`` for every result typed by hand into a markdown cell.

    Parameters
    ----------
    markdown : str
        The source of one markdown cell.

    Yields
    ------
    tuple of str
        The number as written and the (shortened) line it stands in.
    """
    text = _FENCE.sub(" ", markdown)
    text = _MATH.sub(" ", text)
    text = _CODE.sub(" ", text)
    text = _LINK.sub(" ", text)
    for line in text.splitlines():
        if line.lstrip().startswith(("#", "(", "```")):
            continue
        in_table = line.lstrip().startswith("|")
        for m in (_TABLE_NUM if in_table else _NUM).finditer(line):
            before = line[: m.start()].rstrip()
            if _YEAR.match(m.group(1)) or _REF.search(before) or _BOUND.search(before):
                continue
            yield m.group(1), line.strip()[:120]
        if not in_table:
            seen = {m.start() for m in _NUM.finditer(line)}
            for m in _APPROX_INT.finditer(line):
                number = next(g for g in m.groups() if g)
                start = m.start(m.lastindex)
                if start not in seen and not _REF.search(line[:start].rstrip()):
                    yield number, line.strip()[:120]
