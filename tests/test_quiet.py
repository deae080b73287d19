"""``tadiff._quiet.Quiet``: NumPy's error settings for one call, the caller's kept otherwise."""

import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from tadiff._quiet import Quiet

BIG = np.array([1000.0])


def test_named_error_is_ignored_and_result_unchanged():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning would fail the test
        out = Quiet(over="ignore")(np.exp, BIG)
    assert out[0] == np.inf


def test_other_errors_follow_the_callers_settings():
    quiet = Quiet(over="ignore")
    with np.errstate(divide="raise"), pytest.raises(FloatingPointError, match="divide by zero"):
        quiet(np.log, np.array([0.0]))
    # the same Quiet under the default settings again: a warning, not an error
    with pytest.warns(RuntimeWarning, match="divide by zero"):
        quiet(np.log, np.array([0.0]))


def test_settings_are_restored_after_a_call_and_after_an_exception():
    before = np.geterr()
    quiet = Quiet(all="ignore")

    def fail(x):
        np.exp(x)
        raise ValueError("boom")

    quiet(np.exp, BIG)
    assert np.geterr() == before
    with pytest.raises(ValueError, match="boom"):
        quiet(fail, BIG)
    assert np.geterr() == before
    with pytest.warns(RuntimeWarning, match="overflow"):
        np.exp(BIG)


def test_keyword_arguments_reach_the_function():
    out = np.empty(1)
    result = Quiet(over="ignore")(np.exp, BIG, out=out)
    assert result is out and out[0] == np.inf


def test_bad_settings_are_refused_when_made():
    with pytest.raises((TypeError, ValueError)):
        Quiet(over="loudly")


def test_changing_settings_in_a_loop_stays_correct():
    # more distinct caller settings than the Quiet remembers: each call still merges with the
    # settings in force at that call
    quiet = Quiet(over="ignore")
    for i in range(20):
        mode = "raise" if i % 2 else "ignore"
        with np.errstate(divide=mode):
            if mode == "raise":
                with pytest.raises(FloatingPointError):
                    quiet(np.log, np.array([0.0]))
            else:
                assert quiet(np.log, np.array([0.0]))[0] == -np.inf


def test_threads_each_keep_their_own_settings():
    quiet = Quiet(over="ignore")

    def work(i):
        with np.errstate(divide="raise" if i % 2 else "ignore"):
            for _ in range(200):
                quiet(np.exp, BIG)
            return np.geterr()["divide"]

    with ThreadPoolExecutor(4) as pool:
        seen = list(pool.map(work, range(8)))
    assert seen == ["ignore", "raise"] * 4
    assert np.geterr()["over"] == "warn"


def test_in_place_writes_into_its_array_under_the_settings_and_restores_them():
    before = np.geterr()
    a = np.array([1000.0, 0.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = Quiet(over="ignore").in_place(np.exp, a)
    assert result is a and a.tolist() == [np.inf, 1.0]
    assert np.geterr() == before
    # the caller's other settings still apply, and are restored after the error
    with np.errstate(divide="raise"), pytest.raises(FloatingPointError, match="divide by zero"):
        Quiet(over="ignore").in_place(np.log, np.array([0.0]))
    assert np.geterr() == before
