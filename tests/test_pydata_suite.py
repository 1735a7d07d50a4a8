"""tools/pydata_suite.py: pydata/sparse's own tests, run against llvsparse through the
constructor shim (tools/pydata_shim.py). A small sample here; the whole run is the tool's
(README gives its pass rate)."""

import numpy as np
import pytest

import llvsparse as ls
from tools import pydata_shim, pydata_suite


def test_a_sample_of_pydatas_tests_passes_against_llvsparse():
    """Reshape, stack, squeeze, moveaxis and bit shifts: pydata's tests of them compare
    llvsparse's results with numpy's, and all pass."""
    records = pydata_suite.run(("test_coo", "test_elemwise"), "(test_reshape or test_stack "
                               "or test_squeeze or test_moveaxis or test_bitshift_binary) "
                               "and not upcast and not validation")
    kinds = {r["kind"] for r in records}
    assert len(records) >= 40 and kinds == {"pass"}, [r for r in records
                                                    if r["kind"] != "pass"][:3]
    assert "pass" in pydata_suite.summary(records).splitlines()[0]


def test_failures_are_sorted_by_kind():
    """A value that differs is 'wrong'; an exception that names what is unsupported is
    'missing'; any other exception is 'unclear'."""
    with pytest.raises(AssertionError) as wrong:
        pydata_shim.assert_eq(np.ones(3), ls.Tensor.from_numpy(np.zeros(3)))
    assert pydata_shim.classify(wrong)[0] == "wrong"
    with pytest.raises(TypeError) as missing:
        ls.Tensor.from_numpy(np.ones(3, np.complex128))
    kind, text = pydata_shim.classify(missing)
    assert kind == "missing" and text.startswith("TypeError: value dtype") and \
        "complex128" in text
    with pytest.raises(KeyError) as unclear:
        {}["x"]
    assert pydata_shim.classify(unclear)[0] == "unclear"


def test_assert_eq_compares_values_and_dtypes():
    tensor = ls.Tensor.from_numpy(np.array([[0.0, 1.5], [np.nan, 0.0]]), format="coo")
    pydata_shim.assert_eq(tensor, np.array([[0.0, 1.5], [np.nan, 0.0]]))
    with pytest.raises(pydata_shim.WrongResult, match="dtypes differ"):
        pydata_shim.assert_eq(tensor, np.zeros((2, 2), np.float32))
    with pytest.raises(pydata_shim.WrongResult, match="shapes differ"):
        pydata_shim.assert_eq(tensor, np.zeros(4))
