"""One check for every rate a user gives (``max_rate``, ``Sandbox(rate_limit=)``; the compiled
``RateLimit(per_second)`` checks the same way): a number per second, an int, a float or any
other real number (numpy's ``int64``, ``float64``, ``float32``...), finite, at least
:data:`MIN_PER_SECOND` and at most :data:`MAX_PER_SECOND`. A wrong type is a ``TypeError``
naming the parameter; a wrong value a ``ConfigurationError``, never an ``OverflowError``."""

from __future__ import annotations

import math

__all__ = ["MAX_PER_SECOND", "MIN_PER_SECOND", "check_per_second"]

#: The slowest rate: one every 1,000 seconds.
MIN_PER_SECOND = 0.001
#: The fastest rate (more is no limit at all).
MAX_PER_SECOND = 1e9


def check_per_second(name: str, value: object) -> float:
    """``value`` as a float number per second."""
    import numbers

    from .errors import ConfigurationError

    if isinstance(value, bool) or type(value).__name__ in ("bool", "bool_") or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number per second (an int or a float), not {type(value).__name__}")
    try:
        rate = float(value)
    except (OverflowError, ValueError, TypeError):
        rate = math.nan
    if not (math.isfinite(rate) and MIN_PER_SECOND <= rate <= MAX_PER_SECOND):
        raise ConfigurationError(f"{name} must be a number per second of at least 0.001 and at most 1e9, got {value!r}")
    return rate
