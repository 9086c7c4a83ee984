"""The package's public surface, for the tests that sweep it (fuzz, docstrings, architecture).

A subpackage's top level exports only what a user calls (its ``__all__``, at most about 150 names
over all subpackages; ARCHITECTURE.md, *Public API*); every public name is listed in the
``__all__`` of its module.  The public surface of ``fedbandit.<sub>`` is therefore the union of
the ``__all__`` of its public modules: the files and nested packages of ``fedbandit/<sub>/`` whose
names do not start with ``_`` (a nested package, such as ``fedbandit.protocols.statistics``, counts
as one module: its ``__all__``), except the optional integrations imported by name only.
"""

from __future__ import annotations

import importlib
from functools import cache
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "fedbandit"

#: The concept subpackages whose top levels are curated (``integrations`` exports nothing at its top).
SUBPACKAGES = ("accounting", "audit", "book", "envs", "experiments", "learners", "mechanisms", "protocols", "secagg",
               "theory")

#: Nested packages that are optional dependencies, imported by name only (not part of the sweep).
OPTIONAL_SUBPACKAGES = {"integrations/flower"}

#: At most this many names over the subpackages' top levels together (issue #23).
MAX_TOP_LEVEL_NAMES = 150


def public_modules(sub: str) -> list[str]:
    """Dotted names of the public modules of ``fedbandit.<sub>`` (its files and nested packages)."""
    folder = PKG / sub
    stems = [p.stem for p in folder.glob("*.py")]
    stems += [p.parent.name for p in folder.glob("*/__init__.py") if f"{sub}/{p.parent.name}" not in OPTIONAL_SUBPACKAGES]
    return [f"fedbandit.{sub}.{stem}" for stem in sorted(stems) if not stem.startswith("_")]


@cache
def public_names(sub: str) -> dict[str, str]:
    """``{name: module}`` for every name in the ``__all__`` of a public module of ``fedbandit.<sub>``.

    A name two modules list (a re-export, as ``fedbandit.experiments.grid`` of ``fedbandit._grid``'s
    names, or a nested package of its parts) must be the same object in both; the module that
    defines it is given, else the first in alphabetical order.
    """
    out: dict[str, str] = {}
    for dotted in public_modules(sub):
        module = importlib.import_module(dotted)
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            if name in out:
                assert getattr(importlib.import_module(out[name]), name) is obj, (
                    f"{name} is listed by {out[name]} and {dotted} as different objects")
                if getattr(obj, "__module__", None) != dotted:
                    continue
            out[name] = dotted
    return out


def resolve(sub: str, name: str):
    """The object a public name of ``fedbandit.<sub>`` names (from its module)."""
    return getattr(importlib.import_module(public_names(sub)[name]), name)


def top_level(sub: str) -> list[str]:
    """The names ``fedbandit.<sub>`` exports at its top level (its ``__all__``)."""
    return list(importlib.import_module(f"fedbandit.{sub}").__all__)
