"""Privacy protocols P = (R, S, A): the only way a learner's data reaches the server.

Every protocol is composed of a randomizer R, an intermediary S and an analyzer A (objects
of :mod:`~fedbandit.protocols.base`), built by name from one registry::

    from fedbandit.protocols import available, create
    protocol = create("silo-ldp", epsilon=1.0, delta=1e-5)

Kinds: ``statistics`` (continual release of the linear-bandit statistics;
:mod:`~fedbandit.protocols.statistics`, :mod:`~fedbandit.protocols.statistics_catalog`,
:mod:`~fedbandit.protocols.concurrent`), ``counter`` (continual counting of many streams;
:mod:`~fedbandit.protocols.counting`) and ``sum`` (one private vector sum per round;
:mod:`~fedbandit.protocols.sums`).  Intermediaries: :mod:`~fedbandit.protocols.intermediaries`.
"""

import importlib
from typing import Any

# --- re-exports (generated from each module's __all__) ---
_EXPORTS = {
    "Randomizer": "base",
    "Intermediary": "base",
    "Analyzer": "base",
    "Protocol": "base",
    "Communication": "base",
    "ProtocolStateError": "base",
    "KINDS": "base",
    "record_half_range": "concurrent",
    "concurrent_schedule": "concurrent",
    "sequential_batch_sizes": "concurrent",
    "RandomizedResponseRecords": "concurrent",
    "MixedRadixAnalyzer": "concurrent",
    "ConcurrentShuffleProtocol": "concurrent",
    "VectorSumRecords": "concurrent",
    "BatchSumAnalyzer": "concurrent",
    "SequentialVectorSumProtocol": "concurrent",
    "RecordSetting": "concurrent",
    "RecordRandomizer": "concurrent",
    "RecordAnalyzer": "concurrent",
    "CounterRandomizer": "counting",
    "HybridCounter": "counting",
    "BinaryCounter": "counting",
    "PerItemLaplaceCounter": "counting",
    "ExactCounter": "counting",
    "RunningSums": "counting",
    "CounterProtocol": "counting",
    "PRIVACY_WIDTH_KINDS": "counting",
    "CounterSetting": "counting",
    "Identity": "intermediaries",
    "Shuffler": "intermediaries",
    "SecureAggregation": "intermediaries",
    "ConcurrentShufflers": "intermediaries",
    "Allocation": "intermediaries",
    "Release": "intermediaries",
    "Transcript": "intermediaries",
    "ConcurrentShuffleModel": "intermediaries",
    "MixedRadixServer": "intermediaries",
    "Server": "intermediaries",
    "register": "registry",
    "unregister": "registry",
    "available": "registry",
    "create": "registry",
    "describe": "registry",
    "ProtocolInfo": "registry",
    "pack_statistics": "statistics",
    "unpack_statistics": "statistics",
    "user_records": "statistics",
    "n_coordinates": "statistics",
    "ExactStatistics": "statistics",
    "GaussianTree": "statistics",
    "DiscreteGaussianTree": "statistics",
    "VectorSum": "statistics",
    "RunningTotal": "statistics",
    "TreePrefix": "statistics",
    "CentralTree": "statistics",
    "GaussianFactorization": "statistics",
    "PrefixTotal": "statistics",
    "CentralFactorization": "statistics",
    "FACTORIZATIONS": "statistics",
    "factorization_sensitivity_factor": "statistics",
    "GaussianFullTree": "statistics",
    "HonakerPrefix": "statistics",
    "CentralHonakerTree": "statistics",
    "FULL_TREE_RULES": "statistics",
    "StatisticsProtocol": "statistics",
    "AUTO_BITS_ROUNDING_SHARE": "statistics",
    "GRAM_NOISES": "statistics",
    "gram_noise_scale": "statistics",
    "SCHEDULES": "statistics",
    "StatisticsSetting": "statistics",
    "StatisticsNoise": "statistics",
    "StatisticsRandomizer": "statistics",
    "StatisticsAnalyzer": "statistics",
    "CentralStatisticsAnalyzer": "statistics",
    "ExactVectors": "sums",
    "ClippedVectors": "sums",
    "DDGVectors": "sums",
    "PlainSum": "sums",
    "GaussianSum": "sums",
    "DDGDecoder": "sums",
    "BinomialVectors": "sums",
    "BinomialDecoder": "sums",
    "SumProtocol": "sums",
    "AUTO_BITS_ROUNDING_SHARE_SUM": "sums",
    "SumSetting": "sums",
    "SumNoise": "sums",
    "SumRandomizer": "sums",
    "SumAnalyzer": "sums",
    "ModularVectors": "sums",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    # Public names are imported from their module on first use (PEP 562), so importing a
    # subpackage stays cheap and subpackages can import each other's modules freely.
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
# --- end of re-exports ---
