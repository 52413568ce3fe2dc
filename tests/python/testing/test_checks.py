"""The argument checks shared by the sandbox handles (``fxpay.testing._checks``): a ``TypeError``
naming the parameter for a wrong type, an ``InvalidRequestError`` for a wrong value, and the
value itself (as a float for seconds) when it is right."""

from __future__ import annotations

import math

import pytest

import fxpay
from fxpay.testing._checks import check_flag, check_nonneg_seconds, check_seconds, check_type


def test_check_seconds_takes_ints_and_floats_as_floats() -> None:
    for value, expected in ((3, 3.0), (1.5, 1.5), (0, 0.0), (-2, -2.0)):
        got = check_seconds("seconds", value)
        assert type(got) is float
        assert got == expected
    assert math.isnan(check_seconds("seconds", float("nan")))


@pytest.mark.parametrize("bad", [True, False, "1", None, [1]])
def test_check_seconds_refuses_other_types_naming_the_parameter(bad: object) -> None:
    with pytest.raises(TypeError, match=r"^body_timeout must be a number of seconds, not "):
        check_seconds("body_timeout", bad)


def test_check_seconds_refuses_an_int_too_large_for_a_float() -> None:
    with pytest.raises(fxpay.InvalidRequestError, match=r"^seconds is out of range$"):
        check_seconds("seconds", 10**400)


def test_check_flag_takes_only_bools() -> None:
    check_flag("tls", True)
    check_flag("tls", False)
    for bad in (1, 0, "yes", None):
        with pytest.raises(TypeError, match=r"^tls must be a bool, not "):
            check_flag("tls", bad)


def test_check_type_takes_a_type_or_a_tuple_of_types() -> None:
    check_type("client_id", "abc", str, "a str")
    check_type("status", 5, int, "an int")
    check_type("allow", True, bool, "a bool")
    check_type("n", 2.5, (int, float), "a number")
    # A bool passes where bool is one of the kinds, even inside a tuple.
    check_type("flag_or_int", True, (int, bool), "an int or a bool")


@pytest.mark.parametrize(
    ("value", "kind"),
    [("s", int), (None, str), (1, str), (True, int), (False, (int, float)), ("1", (int, float))],
)
def test_check_type_refuses_the_wrong_type_and_a_bool_for_a_number(value: object, kind: type | tuple[type, ...]) -> None:
    with pytest.raises(TypeError, match=r"^status must be the kind, got "):
        check_type("status", value, kind, "the kind")


def test_check_nonneg_seconds_takes_zero_and_positive_finite_numbers() -> None:
    for value, expected in ((0, 0.0), (0.0, 0.0), (2, 2.0), (1.5, 1.5)):
        got = check_nonneg_seconds("timeout", value)
        assert type(got) is float
        assert got == expected


@pytest.mark.parametrize("bad", [-1, -0.5, float("nan"), float("inf"), float("-inf")])
def test_check_nonneg_seconds_refuses_negative_and_non_finite_values(bad: float) -> None:
    with pytest.raises(fxpay.InvalidRequestError, match=r"^timeout must be a finite number >= 0$"):
        check_nonneg_seconds("timeout", bad)


def test_check_nonneg_seconds_checks_the_type_first() -> None:
    with pytest.raises(TypeError, match=r"^timeout must be a number of seconds"):
        check_nonneg_seconds("timeout", "1")
