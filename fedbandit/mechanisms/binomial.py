r"""The distributed binomial mechanism of cpSGD (Agarwal et al. [ASYKM18]_), with modular secure aggregation.

The baseline [KLS21]_ compare the distributed discrete Gaussian with (their Sec. 2).  Client
side, vectorized over leading axes (clients on axis ``-2``):

1. clip to ℓ2 norm c, 2. flatten with the shared rotation (:mod:`.flattening`, as DDG),
3. scale by 1/s and round *unconditionally* (unbiased randomized rounding; cpSGD's
stochastic quantization), 4. add :math:`\mathrm{Bin}(N_i, p)` per coordinate,
5. reduce mod :math:`m = 2^B`.

Server side: the modular sum, minus the known mean :math:`nN_ip`, mapped to
:math:`[-m/2, m/2)`, unflattened and multiplied by s.  [ASYKM18]_ ignore the modular
arithmetic of secure aggregation; the book runs the binomial noise through the same
modular pipeline as DDG so that the two differ only in their noise and its accounting
(:func:`fedbandit.accounting.binomial.binomial_params`, [derived]).

References
----------
.. [ASYKM18] N. Agarwal, A. T. Suresh, F. Yu, S. Kumar and H. B. McMahan, "cpSGD:
   communication-efficient and differentially-private distributed SGD", NeurIPS 2018.
.. [KLS21] P. Kairouz, Z. Liu and T. Steinke, "The distributed discrete Gaussian
   mechanism for federated learning with secure aggregation", ICML 2021.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from fedbandit._validation import check_choice, check_positive_int, check_rng
from fedbandit.accounting.binomial import BinomialParams
from fedbandit.mechanisms.ddg import clip_l2, conditional_randomized_round, modular_clip
from fedbandit.mechanisms.flattening import make_flattener

__all__ = ["BinomialMechanism"]


class BinomialMechanism:
    """Client encoder and server decoder of the distributed binomial mechanism.

    Parameters
    ----------
    params : BinomialParams
        From :func:`fedbandit.accounting.binomial.binomial_params`.
    flatten_seed : int or numpy.random.Generator
        Shared public randomness of the rotation.
    flatten : {"hadamard", "dft"}
    """

    def __init__(self, params: BinomialParams, flatten_seed: int | np.random.Generator = 0, flatten: str = "hadamard") -> None:
        if not isinstance(params, BinomialParams):
            raise TypeError(f"params must be a BinomialParams, got {type(params).__name__}")
        self.params = params
        flatten = check_choice("flatten", flatten, ("hadamard", "dft"))
        self.flattener = make_flattener(params.d, check_rng("flatten_seed", flatten_seed), flatten)
        if self.flattener.d_out != params.d_pad:
            raise ValueError("flattener output dimension does not match params.d_pad")

    def encode(self, x: ArrayLike, rng: np.random.Generator) -> np.ndarray:
        """Client side: int64 residues in [0, m) of shape ``x.shape[:-1] + (d_pad,)``."""
        rng = check_rng("rng", rng)
        p = self.params
        x = np.asarray(x, dtype=np.float64)
        if x.ndim < 1 or x.shape[-1] != p.d:
            raise ValueError(f"x must have last axis of length d={p.d}, got shape {x.shape}")
        # Unconditional rounding: the worst-case norm c/s + sqrt(d') never triggers a redraw.
        bound = p.c / p.scale + math.sqrt(p.d_pad) + 1.0
        rounded = conditional_randomized_round(self.flattener.flatten(clip_l2(x, p.c)) / p.scale, bound, rng)
        noise = rng.binomial(p.trials_per_client, p.p, size=rounded.shape)
        return np.mod(rounded + noise, p.modulus)

    def aggregate(self, residues: ArrayLike) -> np.ndarray:
        """Modular sum over the client axis ``-2``."""
        return np.mod(np.asarray(residues, dtype=np.int64).sum(axis=-2), self.params.modulus)

    def decode(self, total: ArrayLike, n_parties: int) -> np.ndarray:
        """Server side: subtract the noise mean n·N_i·p, modular clipping, unflatten, rescale by s."""
        n_parties = check_positive_int("n_parties", n_parties)
        p = self.params
        offset = int(round(n_parties * p.trials_per_client * p.p))
        centered = modular_clip(np.asarray(total, dtype=np.int64) - offset, p.modulus)
        return p.scale * self.flattener.unflatten(centered.astype(np.float64))
