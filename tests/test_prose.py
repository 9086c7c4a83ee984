"""The rule that keeps results out of hand-typed prose, and the glue helpers."""

import numpy as np
import pytest

from fedbandit.book.prose import glue_number, glue_text, typed_results


def _numbers(md):
    return [n for n, _ in typed_results(md)]


@pytest.mark.parametrize(
    "md, expected",
    [
        ("The exponent is 0.34 here.", ["0.34"]),
        ("It wins 75% of the time and costs 12,345 rounds.", ["75%", "12,345"]),
        ("A horizon of 25000 rounds.", ["25000"]),
        ("The exponent is {glue:md}`slope` here.", []),
        ("With $\\varepsilon = 0.5$ and $$T = 25000$$.", []),
        ("As Theorem 6.1 and Fig. 2 show, see `run(0.5)`.", []),
        ("Asserted within 0.1 of the bound, at least 0.8.", []),
        ("Kairouz et al. (2021) and [the paper](https://x.org/1.2.html).", []),
        ("# Section 2.5 heading", []),
        ("```python\nx = 0.25\n```\nno number here", []),
    ],
)
def test_typed_results_rule(md, expected):
    assert _numbers(md) == expected


def test_glue_number_formats_numpy_scalars_and_refuses_bad_values():
    assert glue_number("a", np.float64(0.3456)) == "0.35"
    assert glue_number("b", np.int64(12345), ",d") == "12,345"
    assert glue_number("c", np.array(0.5), ".0%") == "50%"
    with pytest.raises(ValueError, match="finite"):
        glue_number("d", float("nan"))
    with pytest.raises(TypeError, match="real number"):
        glue_number("e", "0.3")
    with pytest.raises(TypeError, match="real number"):
        glue_number("f", True)
    with pytest.raises(ValueError, match="fmt"):
        glue_number("g", 1.0, "q")
    with pytest.raises(ValueError, match="name"):
        glue_number("1bad", 1.0)
    assert glue_text("h", "0.2–0.3") == "0.2–0.3"
    with pytest.raises(TypeError, match="text"):
        glue_text("i", 0.3)
