"""Closed integer intervals `[lower, upper]`: the domain of every indexing-map variable.

Mirrors XLA's `xla/hlo/analysis/interval.h`. An interval with `lower > upper` is infeasible
(empty); arithmetic follows interval analysis with exact Python integers (no saturation needed).

    >>> str(Interval(0, 3) * Interval(2, 2) + Interval(1, 1))
    '[1, 7]'
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Interval:
    """Inclusive integer range; `Interval(0, -1)` is the canonical empty interval."""

    lower: int
    upper: int

    @staticmethod
    def point(value: int) -> Interval:
        return Interval(value, value)

    @property
    def is_feasible(self) -> bool:
        return self.lower <= self.upper

    @property
    def is_point(self) -> bool:
        return self.lower == self.upper

    @property
    def num_elements(self) -> int:
        return max(0, self.upper - self.lower + 1)

    def contains(self, other: int | Interval) -> bool:
        if isinstance(other, Interval):
            return self.lower <= other.lower and other.upper <= self.upper
        return self.lower <= other <= self.upper

    def intersect(self, other: Interval) -> Interval:
        return Interval(max(self.lower, other.lower), min(self.upper, other.upper))

    def union(self, other: Interval) -> Interval:
        return Interval(min(self.lower, other.lower), max(self.upper, other.upper))

    def __add__(self, other: Interval | int) -> Interval:
        if isinstance(other, int):
            return Interval(self.lower + other, self.upper + other)
        return Interval(self.lower + other.lower, self.upper + other.upper)

    def __sub__(self, other: Interval | int) -> Interval:
        if isinstance(other, int):
            return Interval(self.lower - other, self.upper - other)
        return Interval(self.lower - other.upper, self.upper - other.lower)

    def __neg__(self) -> Interval:
        return Interval(-self.upper, -self.lower)

    def __mul__(self, other: Interval | int) -> Interval:
        if isinstance(other, int):
            other = Interval(other, other)
        products = (self.lower * other.lower, self.lower * other.upper,
                    self.upper * other.lower, self.upper * other.upper)
        return Interval(min(products), max(products))

    def floordiv(self, divisor: int) -> Interval:
        a, b = self.lower // divisor, self.upper // divisor
        return Interval(min(a, b), max(a, b))

    def __str__(self) -> str:
        return f"[{self.lower}, {self.upper}]"

    def __repr__(self) -> str:
        return f"Interval({self.lower}, {self.upper})"
