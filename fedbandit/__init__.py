"""fedbandit: differentially private federated bandits, the package behind the book.

Subpackages, by concept (imported on first access, so ``import fedbandit`` stays cheap):

- :mod:`fedbandit.accounting`: privacy events, accountants and every noise calibration rule
- :mod:`fedbandit.mechanisms`: the noise-adding primitives (tree, Gaussian, discrete Gaussian, ...)
- :mod:`fedbandit.protocols`: privacy protocols P = (R, S, A) and their registry
- :mod:`fedbandit.secagg`: the secure-aggregation protocol (Bonawitz et al. 2017)
- :mod:`fedbandit.learners`: the bandit and federated learners, each taking ``protocol=``
- :mod:`fedbandit.envs`: bandit environments, communication graphs and shipped datasets
- :mod:`fedbandit.theory`: the bounds the chapters plot
- :mod:`fedbandit.audit`: empirical lower bounds on ε (attacks)
- :mod:`fedbandit.experiments`: the grid runner with its cache, the synthesis, statistics helpers
- :mod:`fedbandit.integrations`: the mechanisms in deployment frameworks (Flower; optional ``flwr``)
- :mod:`fedbandit.book`: the scale knob, the figure style and the Sphinx extension
"""

from __future__ import annotations

import importlib


def _version() -> str:
    """The package's version, whose one source is ``pyproject.toml``.

    From a source checkout (the editable install of ``make test``, or ``PYTHONPATH`` pointing at
    a clone) the checkout's ``pyproject.toml`` is read, so the version is never a stale copy
    left in the metadata of an older install; an installed wheel has no ``pyproject.toml`` next
    to the package and the version comes from its metadata, which the build took from that file.
    A copy of the package with neither (not installed, no ``pyproject.toml`` beside it) reports
    ``"0+unknown"`` rather than failing to import.
    """
    # imported here, not at the top: `import fedbandit` stays cheap (it loads no subpackage either)
    from pathlib import Path

    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    if pyproject.is_file():
        import tomllib

        project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
        if project.get("name") == __name__:
            return project["version"]
    import importlib.metadata

    try:
        return importlib.metadata.version(__name__)
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


__version__ = _version()

_SUBPACKAGES = {
    "accounting",
    "audit",
    "book",
    "envs",
    "experiments",
    "integrations",
    "learners",
    "mechanisms",
    "protocols",
    "secagg",
    "theory",
}


def __getattr__(name: str):
    if name in _SUBPACKAGES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | _SUBPACKAGES)
