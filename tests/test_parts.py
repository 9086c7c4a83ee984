"""The parts carry their behaviour: the protocols ask them, never check their types (issue #23).

* No ``isinstance`` on a part type (a :class:`~fedbandit.protocols.Randomizer`,
  :class:`~fedbandit.protocols.Intermediary` or :class:`~fedbandit.protocols.Analyzer`
  subclass) anywhere in ``fedbandit/protocols`` outside a ``supports()`` method: the AST of every
  module is read, every ``isinstance`` call's classes resolved in its module; the detector is
  shown to catch a planted one.
* ``supports()`` returns the reason a pairing is refused (None otherwise), and the constructor
  raises ``ValueError`` with that reason.
* A part that leaves out one of its kind's abstract methods cannot be built (no silent fallback
  to a default payload, an empty theorem or a missing σ), and no part holds its protocol.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import numpy as np
import pytest

import fedbandit.protocols as protocols
from _public_api import resolve
from fedbandit.protocols import Analyzer, Intermediary, Randomizer

PROTOCOLS = Path(protocols.__file__).parent
PART_TYPES = (Randomizer, Intermediary, Analyzer)


def _module_name(path: Path) -> str:
    rel = path.relative_to(PROTOCOLS.parent.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _resolve(node, namespace):
    """The objects an isinstance class argument names (a name, an attribute chain, a tuple of them)."""
    if isinstance(node, ast.Tuple):
        return [obj for elt in node.elts for obj in _resolve(elt, namespace)]
    if isinstance(node, ast.Name):
        return [namespace.get(node.id)]
    if isinstance(node, ast.Attribute):
        base = _resolve(node.value, namespace)
        return [getattr(b, node.attr, None) for b in base]
    return [None]


def part_type_checks(source: str, namespace: dict) -> list[tuple[int, str]]:
    """(line, function) of every isinstance on a part type outside a function named ``supports``."""
    found = []

    def visit(node, function):
        for child in ast.iter_child_nodes(node):
            name = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            if (isinstance(child, ast.Call) and isinstance(child.func, ast.Name) and child.func.id == "isinstance"
                    and len(child.args) == 2 and function != "supports"):
                classes = _resolve(child.args[1], namespace)
                if any(inspect.isclass(c) and issubclass(c, PART_TYPES) for c in classes):
                    found.append((child.lineno, function))
            visit(child, name)

    visit(ast.parse(source), "<module>")
    return found


def _protocol_modules():
    return sorted(PROTOCOLS.rglob("*.py"))


@pytest.mark.parametrize("path", _protocol_modules(), ids=lambda p: str(p.relative_to(PROTOCOLS)))
def test_no_part_type_checks_outside_supports(path):
    module = importlib.import_module(_module_name(path))
    hits = part_type_checks(path.read_text(), vars(module))
    assert not hits, (f"{path.relative_to(PROTOCOLS)}: isinstance on a part type at {hits}: ask the part (a method "
                      "or class attribute of its kind's abstract base); only supports() may check types")


def test_the_part_type_detector_can_fail():
    from fedbandit.protocols import Shuffler, statistics
    from fedbandit.protocols.statistics import GaussianTree

    planted = "def event(self):\n    if isinstance(self.randomizer, (GaussianTree, int)):\n        pass\n"
    assert part_type_checks(planted, {"GaussianTree": GaussianTree}) == [(2, "event")]
    assert part_type_checks(planted.replace("def event", "def supports"), {"GaussianTree": GaussianTree}) == []
    attribute = "def f(p):\n    return isinstance(p.intermediary, statistics.GaussianTree) or isinstance(p, int)\n"
    assert part_type_checks(attribute, {"statistics": statistics}) == [(2, "f")]
    assert part_type_checks("x = isinstance(s, Shuffler)\n", {"Shuffler": Shuffler}) == [(1, "<module>")]
    assert part_type_checks("x = isinstance(v, (str, bytes))\n", {}) == []


def test_supports_gives_the_reason_and_the_constructor_raises_it():
    from fedbandit.protocols import Identity, SecureAggregation, Shuffler, StatisticsProtocol, SumProtocol
    from fedbandit.protocols.statistics import CentralTree, ExactStatistics, GaussianTree, TreePrefix, VectorSum
    from fedbandit.protocols.sums import DDGDecoder, GaussianSum, PlainSum

    assert StatisticsProtocol.supports(GaussianTree(), Identity(), TreePrefix()) is None
    refused = [
        (StatisticsProtocol, (VectorSum(), Identity(), TreePrefix()), "randomizer 'vector-sum' with intermediary 'identity'"),
        (StatisticsProtocol, (ExactStatistics(), Shuffler(), CentralTree()),
         "analyzer 'central-tree' with intermediary 'shuffler'"),
        (StatisticsProtocol, (GaussianTree(), Identity(), PlainSum()), "analyzer 'plain-sum' is not a statistics analyzer"),
        (StatisticsProtocol, ("gaussian", Identity(), TreePrefix()), "randomizer must be a fedbandit.protocols.Randomizer"),
        (SumProtocol, (GaussianTree(), Identity(), PlainSum()), "randomizer 'gaussian-tree' is not a sum randomizer"),
        (SumProtocol, (__import__("fedbandit.protocols.sums", fromlist=["x"]).ClippedVectors(), SecureAggregation(),
                       DDGDecoder()), "DDG residues go to the DDG decoder"),
        (SumProtocol, (__import__("fedbandit.protocols.sums", fromlist=["x"]).ExactVectors(), Identity(), GaussianSum()),
         "the server's noise is calibrated for clipped vectors"),
    ]
    for cls, parts, reason in refused:
        got = cls.supports(*parts)
        assert got is not None and reason in got, (cls.__name__, got)
        with pytest.raises(ValueError, match="^" + __import__("re").escape(got) + "$"):
            cls(*parts, name="x", epsilon=1.0, delta=0.1)


@pytest.mark.parametrize("base_name", ["StatisticsRandomizer", "StatisticsAnalyzer", "SumRandomizer", "SumAnalyzer",
                                       "CounterRandomizer", "RecordRandomizer", "RecordAnalyzer",
                                       "CentralStatisticsAnalyzer"])
def test_a_new_part_without_its_methods_cannot_be_built(base_name):
    """An empty subclass of a kind's abstract part names what it must answer instead of falling back."""
    base = resolve("protocols", base_name)  # the abstract parts' modules (the main ones are also top-level)
    empty = type(f"Empty{base_name}", (base,), {"name": "empty"})
    with pytest.raises(TypeError, match="abstract method"):
        empty()
    missing = set(base.__abstractmethods__)
    assert "describe" in missing
    if issubclass(base, Randomizer):
        assert {"theorem", "event"} <= missing
    if base_name == "StatisticsRandomizer":
        assert {"payload", "node_variance", "server_noise_std", "sigma0", "calibration", "encode"} <= missing


@pytest.mark.parametrize("name", protocols.available())
def test_no_part_holds_its_protocol(name):
    """The parts are configured with a frozen setting and never keep a reference to their protocol."""
    import warnings

    from fedbandit.protocols import Protocol, create, describe

    kind = describe(name).kind
    params = {} if "epsilon" not in describe(name).parameters else dict(epsilon=2.0)
    if "delta" in describe(name).parameters and kind != "counter":
        params["delta"] = 0.1 if name in ("sdp-vector-sum", "sdp-amplification", "dp20") else 1e-3
    if name == "sdp-amplification":
        params["force"] = True
    if name == "concurrent-shuffle":
        params["k"] = 2
    if name == "sequential-vector-sum":
        params["batch_size"] = 4
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = create(name, **params)
        if kind == "statistics":
            user_level = name in ("concurrent-shuffle", "sequential-vector-sum")
            p.configure(n_agents=1 if user_level else 3, dim=2, n_batches=4, batch_size=4 if user_level else 2)
        elif kind == "counter":
            p.configure(n_agents=2, n_arms=3, horizon=16)
        else:
            p.configure(n_parties=4, dim=3, n_rounds=2, clip=1.0)
        p.reset(n_runs=2, rng=np.random.default_rng(0))
    for part in (p.randomizer, p.intermediary, p.analyzer):
        held = [k for k, v in vars(part).items() if isinstance(v, Protocol)]
        assert not held, f"{type(part).__name__} holds its protocol in {held}"
    assert p.setting is not None and getattr(type(p.setting), "__dataclass_params__").frozen
