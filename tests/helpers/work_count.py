"""Deterministic measures of work for complexity tests (the project never asserts wall time).

`python_calls(fn)` counts the Python and C function calls `fn()` makes (sys.setprofile events on
this thread): the same code on the same input gives the same count whatever the machine's load,
so "4x the instructions costs about 4x the calls" is a linearity check that cannot flake.
"""

from __future__ import annotations

import sys
from typing import Any, Callable


def python_calls(fn: Callable[[], Any]) -> int:
    """How many function calls (Python and C) `fn()` makes on this thread."""
    count = 0

    def profile(_frame, event, _arg) -> None:
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    old = sys.getprofile()
    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(old)
    return count
