"""Argument checks shared by the sandbox handles: a ``TypeError`` naming the parameter for a
wrong type, an ``InvalidRequestError`` for a wrong value."""

from __future__ import annotations

import math
import warnings

from ..errors import InvalidRequestError


def check_seconds(name: str, value: object) -> float:
    """A number of seconds as a float: a ``TypeError`` naming ``name`` unless it is an int or
    float; an ``InvalidRequestError`` when it is too large for a float."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, not {type(value).__name__}")
    try:
        return float(value)
    except OverflowError:
        raise InvalidRequestError(f"{name} is out of range") from None


def check_rate(name: str, value: object) -> float:
    """A number of requests per second (``fxpay._rates``): a ``TypeError`` naming ``name``
    unless it is a real number; a ``ConfigurationError`` unless it is finite, at least 0.001
    and at most 1e9."""
    from .._rates import check_per_second

    return check_per_second(name, value)


def check_flag(name: str, value: object) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, not {type(value).__name__}")


def check_type(name: str, value: object, kind: type | tuple[type, ...], what: str) -> None:
    """TypeError naming the parameter unless ``value`` is a ``kind`` (a bool is no number)."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise TypeError(f"{name} must be {what}, got {type(value).__name__}")


def check_nonneg_seconds(name: str, value: object) -> float:
    seconds = check_seconds(name, value)
    if not (math.isfinite(seconds) and seconds >= 0):
        raise InvalidRequestError(f"{name} must be a finite number >= 0")
    return seconds


class UnfiredFaultWarning(UserWarning):
    """A fault set with ``fail_next``, ``drop_next`` or ``delay_next`` that never fired before
    ``reset()`` or ``close()``: most often a path that matches no request (see "Faults" in
    docs/testing.md), so the test did not test what it meant to."""


def warn_unfired(faults: list[str], when: str) -> None:
    for fault in faults:
        warnings.warn(f"{fault} never fired before {when}", UnfiredFaultWarning, stacklevel=3)
