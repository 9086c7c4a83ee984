"""numpydoc sections on the public API of accounting/, mechanisms/, theory/ and envs/ (issue #23).

Every public function and class of these subpackages (every name in the ``__all__`` of one of
their public modules, ``tests/_public_api.py``; not only the few their top levels export) has a
numpydoc docstring that
names each of its parameters under ``Parameters`` (a class: its constructor's; a dataclass may
list its fields under ``Attributes`` instead, since they are its parameters), and a function
that returns a value has a ``Returns`` (or, for a generator, ``Yields``) section.  Nothing is
exempt (parameters named with a leading underscore are private, not API): a name the check
cannot read is a failure.  The docstrings are parsed with numpydoc's own
reader (numpydoc.docscrape), so a section the Sphinx extension would not see does not count.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import textwrap
import warnings

import pytest

from _public_api import public_names, resolve

numpydoc = pytest.importorskip("numpydoc.docscrape", reason="numpydoc is in the test extra")

SUBPACKAGES = ("accounting", "mechanisms", "theory", "envs")


def _returns_value(func) -> bool:
    """Whether ``func``'s own body returns a value (``return x``, x not None) or yields."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(func))).body[0]

    def walk(node):
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                yield child
                yield from walk(child)

    for node in walk(tree):
        if isinstance(node, (ast.Yield, ast.YieldFrom)):
            return True
        if isinstance(node, ast.Return) and node.value is not None:
            if not (isinstance(node.value, ast.Constant) and node.value.value is None):
                return True
    return False


def _documented(entries) -> set[str]:
    """Parameter names of a numpydoc section (``a, b : float`` documents both; ``*args`` and ``**kw`` too)."""
    return {name.strip().lstrip("*") for entry in entries for name in entry.name.split(",")}


def _parameters(obj) -> list[str]:
    try:
        params = inspect.signature(obj).parameters
    except (TypeError, ValueError):  # a class without an introspectable constructor
        return []
    # a parameter whose name starts with an underscore is private (e.g. a dataclass's cached field)
    return [name for name in params if name not in ("self", "cls") and not name.startswith("_")]


def problems(obj) -> list[str]:
    """What ``obj``'s docstring lacks, as readable phrases (empty: complete)."""
    doc = inspect.getdoc(obj)
    if not doc:
        return ["no docstring"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # unknown section names: reported as missing sections below
        try:
            parsed = numpydoc.NumpyDocString(doc)
        except Exception as exc:  # numpydoc refuses a malformed docstring
            return [f"unreadable by numpydoc ({exc})"]
    out = []
    params = _parameters(obj)
    if params:
        documented = _documented(parsed["Parameters"])
        if inspect.isclass(obj) and dataclasses.is_dataclass(obj):
            documented |= _documented(parsed["Attributes"])
        missing = [p for p in params if p not in documented]
        if not documented:
            out.append("no Parameters section")
        elif missing:
            out.append(f"parameters not documented: {missing}")
    if inspect.isfunction(obj) and _returns_value(obj) and not (parsed["Returns"] or parsed["Yields"]):
        out.append("no Returns section")
    return out


def _public_api():
    seen = {}
    for pkg in SUBPACKAGES:
        for name in public_names(pkg):
            obj = resolve(pkg, name)
            if (inspect.isfunction(obj) or inspect.isclass(obj)) and id(obj) not in seen:
                seen[id(obj)] = (f"{pkg}.{name}", obj)
    return sorted(seen.values(), key=lambda item: item[0])


def test_public_api_has_numpydoc_parameters_and_returns():
    api = _public_api()
    assert len(api) > 200  # the four subpackages' functions and classes, each checked once
    incomplete = {name: found for name, obj in api if (found := problems(obj))}
    assert not incomplete, f"{len(incomplete)} of {len(api)} public functions/classes lack numpydoc sections: " + \
        "; ".join(f"{name}: {', '.join(p)}" for name, p in incomplete.items())


def _planted(src: str):
    namespace: dict = {}
    exec(compile(src, "<planted>", "exec"), namespace)  # noqa: S102 - a test's own source
    return namespace["f"]


def test_the_docstring_check_can_fail(tmp_path, monkeypatch):
    # inspect.getsource needs a file: write the planted functions into a module
    module = tmp_path / "planted_docs.py"
    module.write_text(textwrap.dedent('''
        import dataclasses

        def no_sections(a, b):
            """Sum."""
            return a + b

        def one_missing(a, b):
            """Sum.

            Parameters
            ----------
            a : float
                First.

            Returns
            -------
            float
            """
            return a + b

        def complete(a, b=1, *rest, **options):
            """Sum.

            Parameters
            ----------
            a, b : float
                Terms.
            *rest, **options
                Ignored.

            Returns
            -------
            float
            """
            return a + b

        def no_return(x):
            """Print.

            Parameters
            ----------
            x : object
            """
            print(x)

        def inner_return_only(x):
            """Make.

            Parameters
            ----------
            x : int
            """
            def g():
                return x
            g()

        class Undocumented:
            """A thing."""

            def __init__(self, size):
                self.size = size

        @dataclasses.dataclass
        class Fields:
            """A record.

            Attributes
            ----------
            n : int
            """

            n: int
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module("planted_docs")
    assert problems(mod.no_sections) == ["no Parameters section", "no Returns section"]
    assert problems(mod.one_missing) == ["parameters not documented: ['b']"]
    assert problems(mod.complete) == []
    assert problems(mod.no_return) == [] and problems(mod.inner_return_only) == []
    assert problems(mod.Undocumented) == ["no Parameters section"]
    assert problems(mod.Fields) == []
