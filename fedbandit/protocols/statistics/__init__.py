"""Protocols for the linear-bandit statistics: continual release of Σ x y and Σ x xᵀ.

A federated linear learner hands the protocol, at every synchronization, each agent's
sums of x y (bias) and x xᵀ (Gram) over the batch just ended (and, for randomizers that
act on every user's record, the batch's individual records) and gets back the server's
noisy synchronized prefix sums -- Ũ_syn and W̃_syn of Zhou & Chowdhury's Algorithm 1.
Internally the statistics are packed into one vector of D = d + d(d+1)/2 coordinates per
party (:func:`pack_statistics`).

The protocol is composed (:class:`StatisticsProtocol`) of

* a randomizer, a :class:`StatisticsRandomizer` (:class:`ExactStatistics`,
  :class:`GaussianTree` -- Algorithm 2 of Zhou & Chowdhury, :class:`DiscreteGaussianTree` --
  the distributed discrete Gaussian of Kairouz, Liu & Steinke inside every tree node,
  :class:`VectorSum` -- the shuffle vector sum of Cheu, Joseph, Mao & Peng inside every tree
  node, :class:`GaussianFactorization` -- every party's noisy prefixes through the
  square-root factorization of the prefix-sum matrix or its banded form, :class:`GaussianFullTree` --
  every node of the full binary tree, for Honaker's estimator; both beyond the papers);
* an intermediary (:mod:`fedbandit.protocols.intermediaries`);
* an analyzer, a :class:`StatisticsAnalyzer` (:class:`RunningTotal`, :class:`TreePrefix` --
  the prefix from the p-sums at the set bits of k, :class:`CentralTree` -- a trusted server's
  own tree mechanism, :class:`PrefixTotal` -- the sum of the parties' factorized prefixes,
  :class:`CentralFactorization` -- a trusted server's own factorized release, :class:`HonakerPrefix` --
  Honaker's estimate of the prefixes from the full tree's nodes, :class:`CentralHonakerTree` -- a
  trusted server's own full tree with Honaker's estimator).

One file per part (as Opacus has one file per accountant): :mod:`.exact`, :mod:`.gaussian_tree`,
:mod:`.discrete_gaussian_tree`, :mod:`.vector_sum`, :mod:`.factorization`, :mod:`.running_total`,
:mod:`.tree_prefix`, :mod:`.central_tree`, :mod:`.prefix_total`, :mod:`.central_factorization`,
:mod:`.full_tree`, :mod:`.honaker_prefix`, :mod:`.central_honaker`;
the abstract parts in :mod:`.parts`, the frozen setting they are configured for in
:mod:`.setting`, the packing in :mod:`.packing` and the protocol in :mod:`.protocol`.

The part that adds the noise (the randomizer, or a central analyzer) describes the releases
as a privacy event (:mod:`fedbandit.accounting.events`) for what the intermediary lets the
server see: one party's messages (identity, shuffler) or only their sum (secure
aggregation); the accounting is :func:`fedbandit.accounting.account`.
"""

from fedbandit.protocols.statistics.central_factorization import CentralFactorization
from fedbandit.protocols.statistics.central_honaker import CentralHonakerTree
from fedbandit.protocols.statistics.central_tree import CentralTree
from fedbandit.protocols.statistics.discrete_gaussian_tree import AUTO_BITS_ROUNDING_SHARE, DiscreteGaussianTree
from fedbandit.protocols.statistics.exact import ExactStatistics
from fedbandit.protocols.statistics.factorization import (
    FACTORIZATIONS,
    GaussianFactorization,
    factorization_sensitivity_factor,
)
from fedbandit.protocols.statistics.full_tree import FULL_TREE_RULES, GaussianFullTree
from fedbandit.protocols.statistics.gaussian_tree import GRAM_NOISES, GaussianTree, gram_noise_scale
from fedbandit.protocols.statistics.honaker_prefix import HonakerPrefix
from fedbandit.protocols.statistics.packing import (
    SCHEDULES,
    n_coordinates,
    pack_statistics,
    unpack_statistics,
    user_records,
)
from fedbandit.protocols.statistics.packing import check_setting as check_setting  # (not public; concurrent.py)
from fedbandit.protocols.statistics.parts import (
    CentralStatisticsAnalyzer,
    StatisticsAnalyzer,
    StatisticsNoise,
    StatisticsRandomizer,
)
from fedbandit.protocols.statistics.prefix_total import PrefixTotal
from fedbandit.protocols.statistics.protocol import StatisticsProtocol
from fedbandit.protocols.statistics.running_total import RunningTotal
from fedbandit.protocols.statistics.setting import StatisticsSetting
from fedbandit.protocols.statistics.tree_prefix import TreePrefix
from fedbandit.protocols.statistics.vector_sum import VectorSum

__all__ = [
    "pack_statistics",
    "unpack_statistics",
    "user_records",
    "n_coordinates",
    "ExactStatistics",
    "GaussianTree",
    "DiscreteGaussianTree",
    "VectorSum",
    "RunningTotal",
    "TreePrefix",
    "CentralTree",
    "GaussianFactorization",
    "PrefixTotal",
    "CentralFactorization",
    "FACTORIZATIONS",
    "factorization_sensitivity_factor",
    "GaussianFullTree",
    "HonakerPrefix",
    "CentralHonakerTree",
    "FULL_TREE_RULES",
    "StatisticsProtocol",
    "AUTO_BITS_ROUNDING_SHARE",
    "GRAM_NOISES",
    "gram_noise_scale",
    "SCHEDULES",
    "StatisticsSetting",
    "StatisticsNoise",
    "StatisticsRandomizer",
    "StatisticsAnalyzer",
    "CentralStatisticsAnalyzer",
]
