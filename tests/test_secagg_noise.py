"""The secure noise source (fedbandit.secagg.noise): the real ChaCha20 keystream, deterministic per key, right law.

Statistical test: a chi-square goodness-of-fit of the exact discrete Gaussian sampler fed
by the keystream against the exact pmf, at false-alarm rate 1e-3.  The key is fixed, so
the test is deterministic; over random keys a correct implementation would fail it with
probability 1e-3.  The same test on a sampler with the wrong sigma fails (the check can fail).
"""

from __future__ import annotations

import numpy as np
import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from scipy import stats

from fedbandit.mechanisms.discrete_gaussian import discrete_gaussian_pmf, sample_discrete_gaussian
from fedbandit.secagg.noise import KEYSTREAM_CIPHER, secure_generator

KEY = bytes(range(32))


def _chacha20(key: bytes, nonce16: bytes, n_bytes: int) -> bytes:
    return Cipher(algorithms.ChaCha20(key, nonce16), None).encryptor().update(bytes(n_bytes))


def test_openssl_chacha20_matches_rfc8439():
    """RFC 8439 section 2.3.2: key 00..1f, block counter 1, nonce 00:00:00:09:00:00:00:4a:00:00:00:00."""
    block = _chacha20(KEY, (1).to_bytes(4, "little") + bytes.fromhex("000000090000004a00000000"), 64)
    assert block.hex() == (
        "10f1e7e4d13b5915500fdd1fa32071c4c7d1f4c733c068030422aa9ac3d46c4e"
        "d2826446079faa0914c2d705d98b02a2b5129cd1de164eb9cbd083e8a2503c4e"
    )


@pytest.mark.parametrize("stream", [0, 1, 2**64 - 1])
def test_raw_output_is_the_chacha20_keystream_of_the_stream_key(stream):
    info = b"fedbandit-noise-stream" + stream.to_bytes(8, "big")
    k = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(KEY)
    raw = secure_generator(KEY, stream=stream).bit_generator.random_raw(4096).astype("<u8").tobytes()
    assert raw == _chacha20(k, bytes(16), 8 * 4096)  # 512 blocks of 64 bytes
    assert KEYSTREAM_CIPHER == "ChaCha20"


def test_deterministic_for_a_fixed_key_and_distinct_otherwise():
    a = sample_discrete_gaussian(7.5, 10_000, secure_generator(KEY))
    b = sample_discrete_gaussian(7.5, 10_000, secure_generator(KEY))
    np.testing.assert_array_equal(a, b)
    c = sample_discrete_gaussian(7.5, 10_000, secure_generator(KEY, stream=1))
    d = sample_discrete_gaussian(7.5, 10_000, secure_generator(bytes(32)))
    e = sample_discrete_gaussian(7.5, 10_000, secure_generator())  # OS key
    f = sample_discrete_gaussian(7.5, 10_000, secure_generator())
    for other in (c, d, e, f):
        assert np.mean(a == other) < 0.2  # P(equal) per draw is about 1/(sqrt(2 pi) 7.5) ~ 0.05
    assert np.mean(e == f) < 0.2
    assert isinstance(secure_generator(KEY), np.random.Generator)


def _gof_pvalue(samples, sigma, cut=10):
    """Chi-square p-value of the counts of -cut..cut and the two tails against the exact pmf."""
    p_mid = discrete_gaussian_pmf(np.arange(-cut, cut + 1), sigma)
    tail = 0.5 * (1.0 - p_mid.sum())  # the law is symmetric
    p = np.concatenate([[tail], p_mid, [tail]])
    inside = samples[np.abs(samples) <= cut]
    obs = np.concatenate([[np.sum(samples < -cut)], np.bincount(inside + cut, minlength=2 * cut + 1), [np.sum(samples > cut)]])
    keep = p * samples.size >= 5  # the usual validity rule of the chi-square approximation
    expected = p[keep] / p[keep].sum() * obs[keep].sum()
    return stats.chisquare(obs[keep], expected).pvalue


def test_keystream_discrete_gaussian_has_the_right_law():
    """Chi-square goodness of fit at false-alarm rate 1e-3 (fixed key: deterministic)."""
    x = sample_discrete_gaussian(2.5, 400_000, secure_generator(KEY, stream=7))
    assert _gof_pvalue(x, 2.5) > 1e-3
    # the same test catches a sampler with sigma off by 4 %
    wrong = sample_discrete_gaussian(2.6, 400_000, secure_generator(KEY, stream=7))
    assert _gof_pvalue(wrong, 2.5) < 1e-3


def test_keystream_raw_bytes_are_uniform():
    """Chi-square test of 2^20 keystream bytes against the uniform law on 0..255 (false alarm 1e-3; fixed key)."""
    raw = secure_generator(KEY, stream=3).bit_generator.random_raw(2**17).astype("<u8").view(np.uint8)
    assert stats.chisquare(np.bincount(raw, minlength=256)).pvalue > 1e-3


@pytest.mark.parametrize(
    "kwargs, exc, pattern",
    [
        (dict(key=b"short"), TypeError, "key must be 32 bytes"),
        (dict(key="0" * 32), TypeError, "key must be 32 bytes"),
        (dict(key=KEY, stream=-1), ValueError, r"stream must be an integer in \[0, 2\*\*64\)"),
        (dict(key=KEY, stream=2**64), ValueError, r"stream must be an integer in \[0, 2\*\*64\)"),
        (dict(key=KEY, stream=True), TypeError, "stream must be an integer"),
        (dict(key=KEY, stream=1.0), TypeError, "stream must be an integer"),
    ],
)
def test_bad_arguments_are_refused(kwargs, exc, pattern):
    with pytest.raises(exc, match=pattern):
        secure_generator(**kwargs)
