r"""A cryptographically secure noise source: a :class:`numpy.random.Generator` over the ChaCha20 keystream.

Why a deployment needs it
-------------------------
The privacy of the distributed discrete Gaussian rests on the server not knowing the
noise each client adds.  A simulation's PCG64 is not a cryptographic generator: its
state can be recovered from a modest number of outputs, and a seed of a few bytes can
be found by search, after which the noise is known and can be subtracted.  A client in a
deployment must draw its noise from a cryptographically secure generator keyed with
secret randomness.  Simulations keep PCG64 (fast, seeded, reproducible).

What this module gives
----------------------
:func:`secure_generator` returns an ordinary :class:`numpy.random.Generator` whose bit
generator is ``randomgen.ChaCha`` with 20 rounds and a 256-bit key, so every sampler of
the package that takes a Generator -- in particular the exact discrete Gaussian sampler
of :mod:`fedbandit.mechanisms.discrete_gaussian`, which turns 64-bit uniform integers
into samples with integer comparisons only -- runs unchanged on the keystream.  Its raw
64-bit outputs, read as little-endian bytes, are the ChaCha20 keystream of [Ber08]_ under
the stream key

.. math:: k_s = \mathrm{HKDF\text{-}SHA256}(\text{ikm} = \texttt{key},\ \text{salt} = \varnothing,\
          \text{info} = \texttt{"fedbandit-noise-stream"} \,\|\, s_{\text{8 bytes, big endian}})

with an all-zero nonce and block counter 0 (one key, independent streams
:math:`s = 0, 1, \dots`); the tests check this byte for byte against OpenSSL's ChaCha20
(through ``cryptography``), and OpenSSL's against the test vector of RFC 8439.

What that guarantees [derived]: the keystream of a secret key is computationally
indistinguishable from uniform bits (the standard assumption on ChaCha20), so the
samples are computationally indistinguishable from the exact discrete Gaussian law; the
DP guarantee then holds against computationally bounded observers (computational DP),
which is the same assumption secure aggregation's masks already rest on.  With a key
from the operating system (``key=None``) nobody else can reproduce the noise; a fixed
key (tests, a reproducible book page) makes the draws deterministic -- and public.

References
----------
.. [Ber08] D. J. Bernstein, "ChaCha, a variant of Salsa20", SASC 2008 (the 20-round
   function also specified in RFC 8439).
"""

from __future__ import annotations

import os

import numpy as np
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from randomgen import ChaCha

__all__ = ["KEYSTREAM_CIPHER", "secure_generator"]

#: The keystream behind :func:`secure_generator`.
KEYSTREAM_CIPHER = "ChaCha20"


def secure_generator(key: bytes | None = None, *, stream: int = 0) -> np.random.Generator:
    """A :class:`numpy.random.Generator` drawing from the ChaCha20 keystream of ``key``.

    Parameters
    ----------
    key : bytes of length 32, optional
        The 256-bit key.  ``None`` (the default, for deployment) draws a fresh key from the
        operating system's CSPRNG (:func:`os.urandom`); a fixed key makes the stream
        deterministic (tests, reproducible pages) and anyone who knows it can reproduce
        the noise.
    stream : int, optional
        Stream number in ``[0, 2**64)``: one key, many independent streams (e.g. one per
        client of a simulation), each keyed by HKDF from ``key`` and the stream number.

    Returns
    -------
    numpy.random.Generator
        Over ``randomgen.ChaCha(key=k_s, counter=0, rounds=20)`` (``k_s`` as in the module notes).
    """
    if key is None:
        key = os.urandom(32)
    if not isinstance(key, (bytes, bytearray)) or len(key) != 32:
        raise TypeError(f"key must be 32 bytes (a 256-bit ChaCha20 key) or None, got {key!r:.60}")
    if isinstance(stream, bool) or not isinstance(stream, (int, np.integer)):
        raise TypeError(f"stream must be an integer in [0, 2**64), got {stream!r} of type {type(stream).__name__}")
    if not 0 <= int(stream) < 1 << 64:
        raise ValueError(f"stream must be an integer in [0, 2**64), got {stream!r}")
    info = b"fedbandit-noise-stream" + int(stream).to_bytes(8, "big")
    stream_key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(bytes(key))
    return np.random.Generator(ChaCha(key=int.from_bytes(stream_key, "little"), counter=0, rounds=20))
