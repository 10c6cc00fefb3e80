"""`IndexingMap`: affine-like results over a bounded domain, as XLA's `xla/hlo/analysis/indexing_map.h`.

Where it sits: per-opcode maps (op_indexing.py) and the loop emitter's thread map
(thread_indexing.py) are `IndexingMap`s; fusion_indexing.py composes them; emitters evaluate,
print and lower them. A map is `(d0, ..)[s0, ..]{rt0, ..} -> (results)` plus a domain: an
inclusive interval per dimension variable `d`, range variable `s` and runtime variable `rt`, and
extra constraints `expr in [lo, hi]`. In expressions, symbols are numbered range variables first,
then runtime variables (XLA's packing), so `rt0` of a map with two range variables is `sym(2)`.

Maps are values: every method returns a new map.

    >>> from hlo_codegen.indexing.affine import dim
    >>> m = IndexingMap.from_tensor_sizes((dim(1), dim(0)), (40, 20))
    >>> str(m)
    '(d0, d1) -> (d1, d0), domain: d0 in [0, 39], d1 in [0, 19]'
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable, Iterable, Sequence, Union

import numpy as np

from hlo_codegen.indexing.affine import DIM, MOD, SYMBOL, AffineExpr, const, dim, sym
from hlo_codegen.indexing.interval import Interval
from hlo_codegen.indexing.simplify import RangeEvaluator, Simplifier, simplify_constraint_range

EMPTY_INTERVAL = Interval(0, -1)
# Upper bound on the number of domain points `domain_points` will enumerate.
MAX_ENUMERATED_POINTS = 1 << 24
MAX_CONSTRAINT_ROUNDS = 32
# Runtime-variable values for `domain_points`: constants, or a function of the dimension columns.
RuntimeValues = Union[Sequence[int], Callable[[list], Sequence], None]


@dataclass(frozen=True)
class Variable:
    """A dimension, range or runtime variable: its bounds and an optional display name."""

    bounds: Interval
    name: str = ""


class IndexingMap:
    """Immutable indexing map; build with the constructor or `from_tensor_sizes`."""

    __slots__ = ("results", "dim_vars", "range_vars", "rt_vars", "_constraints", "is_known_empty",
                 "is_undefined")

    def __init__(self, results: Iterable[AffineExpr], dim_vars: Iterable[Variable],
                 range_vars: Iterable[Variable] = (), rt_vars: Iterable[Variable] = (),
                 constraints: Iterable[tuple[AffineExpr, Interval]] = ()):
        self.results: tuple[AffineExpr, ...] = tuple(results)
        self.dim_vars: tuple[Variable, ...] = tuple(dim_vars)
        self.range_vars: tuple[Variable, ...] = tuple(range_vars)
        self.rt_vars: tuple[Variable, ...] = tuple(rt_vars)
        self._constraints: dict[AffineExpr, Interval] = {}
        self.is_known_empty = False
        self.is_undefined = False
        if not all(v.bounds.is_feasible for v in self.dim_vars + self.range_vars + self.rt_vars):
            self._reset_to_known_empty()
            return
        for expr, interval in constraints:
            self._add_constraint(expr, interval)

    # -- constructors ------------------------------------------------------------------------
    @staticmethod
    def from_tensor_sizes(results: Iterable[AffineExpr], dim_sizes: Sequence[int],
                          symbol_sizes: Sequence[int] = ()) -> IndexingMap:
        return IndexingMap(results, vars_from_sizes(dim_sizes), vars_from_sizes(symbol_sizes))

    @staticmethod
    def identity(dim_sizes: Sequence[int]) -> IndexingMap:
        return IndexingMap.from_tensor_sizes([dim(i) for i in range(len(dim_sizes))], dim_sizes)

    @staticmethod
    def undefined() -> IndexingMap:
        m = IndexingMap((), ())
        m.is_undefined = True
        return m

    def _copy(self) -> IndexingMap:
        m = IndexingMap.__new__(IndexingMap)
        m.results, m.dim_vars, m.range_vars, m.rt_vars = (
            self.results, self.dim_vars, self.range_vars, self.rt_vars)
        m._constraints = dict(self._constraints)
        m.is_known_empty, m.is_undefined = self.is_known_empty, self.is_undefined
        return m

    # -- queries -----------------------------------------------------------------------------
    @property
    def num_dims(self) -> int:
        return len(self.dim_vars)

    @property
    def num_symbols(self) -> int:
        return len(self.range_vars) + len(self.rt_vars)

    @property
    def num_results(self) -> int:
        return len(self.results)

    @property
    def constraints(self) -> dict[AffineExpr, Interval]:
        return dict(self._constraints)

    def dim_bounds(self) -> list[Interval]:
        return [v.bounds for v in self.dim_vars]

    def symbol_bounds(self) -> list[Interval]:
        return [v.bounds for v in self.range_vars + self.rt_vars]

    def rt_symbol(self, index: int) -> AffineExpr:
        """The expression leaf of runtime variable `rt<index>`."""
        return sym(len(self.range_vars) + index)

    def range_evaluator(self, use_constraints: bool = True) -> RangeEvaluator:
        return RangeEvaluator(self.dim_bounds(), self.symbol_bounds(),
                              self._constraints if use_constraints else None)

    def is_symbol_constrained(self, index: int) -> bool:
        return any(index in e.used_symbols() for e in self._constraints)

    # -- constraints -------------------------------------------------------------------------
    def with_constraint(self, expr: AffineExpr, interval: Interval) -> IndexingMap:
        m = self._copy()
        m._add_constraint(expr, interval)
        return m

    def _set_bound(self, expr: AffineExpr, interval: Interval) -> None:
        if expr.kind == DIM:
            dims = list(self.dim_vars)
            dims[expr.value] = replace(dims[expr.value], bounds=interval)
            self.dim_vars = tuple(dims)
            return
        index, num_range = expr.value, len(self.range_vars)
        if index < num_range:
            rv = list(self.range_vars)
            rv[index] = replace(rv[index], bounds=interval)
            self.range_vars = tuple(rv)
        else:
            rt = list(self.rt_vars)
            rt[index - num_range] = replace(rt[index - num_range], bounds=interval)
            self.rt_vars = tuple(rt)

    def _bound_of(self, expr: AffineExpr) -> Interval:
        if expr.kind == DIM:
            return self.dim_vars[expr.value].bounds
        return self.symbol_bounds()[expr.value]

    def _add_constraint(self, expr: AffineExpr, interval: Interval) -> None:
        if self.is_known_empty:
            return
        if not interval.is_feasible:
            self._reset_to_known_empty()
            return
        if expr.kind in (DIM, SYMBOL):
            new = self._bound_of(expr).intersect(interval)
            self._set_bound(expr, new)
            if not new.is_feasible:
                self._reset_to_known_empty()
            return
        if expr.is_constant:
            if not interval.contains(expr.value):
                self._reset_to_known_empty()
            return
        old = self._constraints.get(expr)
        new = interval if old is None else old.intersect(interval)
        self._constraints[expr] = new
        if not new.is_feasible:
            self._reset_to_known_empty()

    def _reset_to_known_empty(self) -> None:
        self.results = tuple(const(0) for _ in self.results)
        self.dim_vars = tuple(replace(v, bounds=EMPTY_INTERVAL) for v in self.dim_vars)
        self.range_vars = tuple(replace(v, bounds=EMPTY_INTERVAL) for v in self.range_vars)
        self._constraints = {}
        self.is_known_empty = True

    # -- simplification ----------------------------------------------------------------------
    def simplify(self, preserve_point_dims: bool = False) -> IndexingMap:
        """Simplify constraints (shrinking variable bounds), then the results (XLA's Simplify).

        With `preserve_point_dims`, variables with a single value are not replaced by constants
        (XLA's `SimplifyPointDimensions::kPreserve`, used for reshape and bitcast maps)."""
        if self.is_undefined or self.is_known_empty:
            return self
        m = self._copy()
        for _ in range(MAX_CONSTRAINT_ROUNDS):
            changed = m._simplify_constraint_exprs()
            changed |= m._simplify_constraint_ranges()
            if m.is_known_empty:
                return m
            if not changed:
                break
        m._merge_mod_constraints()
        if m.is_known_empty:
            return m
        simplifier = Simplifier(m.range_evaluator(True), replace_points=not preserve_point_dims)
        m.results = tuple(simplifier.simplify(e) for e in m.results)
        return m

    def _simplify_constraint_exprs(self) -> bool:
        ev = self.range_evaluator(use_constraints=False)
        simplifier = Simplifier(ev)
        to_add, to_remove = [], []
        for expr, interval in self._constraints.items():
            simplified = simplifier.simplify(expr)
            value_range = ev.range(simplified)
            if interval.contains(value_range):
                to_remove.append(expr)  # always satisfied
                continue
            if not interval.intersect(value_range).is_feasible:
                self._reset_to_known_empty()  # never satisfied
                return True
            if simplified != expr:
                to_remove.append(expr)
                to_add.append((simplified, interval))
        for expr in to_remove:
            del self._constraints[expr]
        for expr, interval in to_add:
            self._add_constraint(expr, interval)
        return bool(to_add)

    def _simplify_constraint_ranges(self) -> bool:
        simplifier = Simplifier(self.range_evaluator(use_constraints=False))
        updates = []
        for expr, interval in self._constraints.items():
            new_expr, new_interval = simplify_constraint_range(simplifier, expr, interval)
            if new_expr != expr or new_interval != interval:
                updates.append((expr, new_expr, new_interval))
        for old, _, _ in updates:
            del self._constraints[old]
        for _, expr, interval in updates:
            self._add_constraint(expr, interval)
        return bool(updates)

    def _merge_mod_constraints(self) -> None:
        """`x mod 2 in [r, r]` and `x mod 3 in [r, r]` -> `x mod 6 in [r, r]`; tighten x's bounds."""
        groups: dict[AffineExpr, dict[int, list[AffineExpr]]] = {}
        for expr, interval in self._constraints.items():
            if expr.kind == MOD and interval.is_point:
                groups.setdefault(expr.lhs, {}).setdefault(interval.lower, []).append(expr)
        for lhs, by_residue in groups.items():
            for residue, exprs in by_residue.items():
                modulus = 1
                for e in exprs:
                    modulus = math.lcm(modulus, e.rhs.value)
                if len(exprs) > 1:
                    for e in exprs:
                        del self._constraints[e]
                    self._constraints[lhs % modulus] = Interval(residue, residue)
                if lhs.kind in (DIM, SYMBOL) and not self.is_known_empty:
                    b = self._bound_of(lhs)
                    lo = (b.lower // modulus) * modulus + residue
                    lo = lo if lo >= b.lower else lo + modulus
                    hi = (b.upper // modulus) * modulus + residue
                    hi = hi if hi <= b.upper else hi - modulus
                    self._add_constraint(lhs, Interval(lo, hi))

    # -- removing variables ------------------------------------------------------------------
    def remove_unused_symbols(self) -> IndexingMap:
        return self.remove_unused_symbols_with_mask()[0]

    def remove_unused_symbols_with_mask(self) -> tuple[IndexingMap, list[bool]]:
        """Drop symbols used by no result (and constraints only about them); mask = removed."""
        return self._remove_unused(remove_dims=False)

    def remove_unused_vars(self) -> IndexingMap:
        """Drop unused dimensions and symbols (XLA's RemoveUnusedVars)."""
        return self._remove_unused(remove_dims=True)[0]

    def _remove_unused(self, remove_dims: bool) -> tuple[IndexingMap, list[bool]]:
        if self.is_undefined:
            return self, []
        used_dims = set().union(*(e.used_dims() for e in self.results))
        used_syms = set().union(*(e.used_symbols() for e in self.results))
        candidates = []
        for expr in self._constraints:
            d, s = expr.used_dims(), expr.used_symbols()
            if (not d or remove_dims) and not (d & used_dims) and not (s & used_syms):
                candidates.append(expr)
            else:
                used_dims |= d
                used_syms |= s
        m = self._copy()
        for expr in candidates:
            if not (expr.used_dims() & used_dims) and not (expr.used_symbols() & used_syms):
                del m._constraints[expr]
        keep_dims = [i for i in range(self.num_dims) if i in used_dims or not remove_dims]
        keep_syms = [j for j in range(self.num_symbols) if j in used_syms]
        removed = [j not in used_syms for j in range(self.num_symbols)]
        dim_repl = [const(0)] * self.num_dims
        for new, old in enumerate(keep_dims):
            dim_repl[old] = dim(new)
        sym_repl = [const(0)] * self.num_symbols
        for new, old in enumerate(keep_syms):
            sym_repl[old] = sym(new)
        nr = len(self.range_vars)
        m.results = tuple(e.replace(dim_repl, sym_repl) for e in self.results)
        m.dim_vars = tuple(self.dim_vars[i] for i in keep_dims)
        m.range_vars = tuple(self.range_vars[j] for j in keep_syms if j < nr)
        m.rt_vars = tuple(self.rt_vars[j - nr] for j in keep_syms if j >= nr)
        m._constraints = {e.replace(dim_repl, sym_repl): r for e, r in m._constraints.items()}
        return m, removed

    def convert_symbols_to_dims(self) -> IndexingMap:
        """Range and runtime variables become trailing dimensions (names kept)."""
        if self.is_undefined or self.is_known_empty or self.num_symbols == 0:
            return self
        n = self.num_dims
        repl = [dim(n + j) for j in range(self.num_symbols)]
        return IndexingMap((e.replace(None, repl) for e in self.results),
                           self.dim_vars + self.range_vars + self.rt_vars, (), (),
                           ((e.replace(None, repl), r) for e, r in self._constraints.items()))

    def rename(self, dims: Sequence[str] | None = None, range_vars: Sequence[str] | None = None,
               rt_vars: Sequence[str] | None = None) -> IndexingMap:
        m = self._copy()
        if dims is not None:
            m.dim_vars = tuple(replace(v, name=n) for v, n in zip(self.dim_vars, dims))
        if range_vars is not None:
            m.range_vars = tuple(replace(v, name=n) for v, n in zip(self.range_vars, range_vars))
        if rt_vars is not None:
            m.rt_vars = tuple(replace(v, name=n) for v, n in zip(self.rt_vars, rt_vars))
        return m

    def sub_map(self, result_index: int) -> IndexingMap:
        m = self._copy()
        m.results = (self.results[result_index],)
        return m

    # -- evaluation --------------------------------------------------------------------------
    def evaluate(self, dims: Sequence, symbols: Sequence = ()) -> list:
        """Results for integer or numpy-array variable values (arrays broadcast together)."""
        return [e.evaluate(dims, symbols) for e in self.results]

    def constraints_satisfied(self, dims: Sequence, symbols: Sequence = ()):
        ok = True
        for expr, r in self._constraints.items():
            v = expr.evaluate(dims, symbols)
            ok = ok & (v >= r.lower) & (v <= r.upper)
        return ok

    def domain_points(self, rt_values: RuntimeValues = None) -> tuple[np.ndarray, np.ndarray]:
        """Every point of the domain: (dims [N, num_dims], symbols [N, num_symbols]), int64.

        Runtime variables are enumerated over their bounds unless `rt_values` gives them: a
        sequence of ints, or a function from the dimension columns to one array per runtime
        variable. Given values are clamped into the variables' bounds, as the emitters clamp
        (dynamic-slice semantics)."""
        nd, ns = self.num_dims, self.num_symbols
        bounds = self.dim_bounds() + [v.bounds for v in self.range_vars]
        if rt_values is None:
            bounds += [v.bounds for v in self.rt_vars]
        if self.is_known_empty or any(not b.is_feasible for b in bounds):
            return np.zeros((0, nd), np.int64), np.zeros((0, ns), np.int64)
        total = math.prod(b.num_elements for b in bounds)
        if total > MAX_ENUMERATED_POINTS:
            raise ValueError(f"domain of {total} points is too large to enumerate")
        grids = np.indices([b.num_elements for b in bounds], dtype=np.int64).reshape(len(bounds), total)
        pts = grids.T + np.array([b.lower for b in bounds], np.int64).reshape(1, -1)
        if rt_values is not None and self.rt_vars:
            given = rt_values(list(pts[:, :nd].T)) if callable(rt_values) else rt_values
            cols = [np.clip(np.broadcast_to(np.asarray(v, np.int64), (pts.shape[0],)), r.bounds.lower,
                            r.bounds.upper) for v, r in zip(given, self.rt_vars)]
            pts = np.concatenate([pts, np.stack(cols, axis=1)], axis=1)
        mask = np.broadcast_to(self.constraints_satisfied(list(pts[:, :nd].T), list(pts[:, nd:].T)),
                               (pts.shape[0],))
        pts = pts[mask]
        return pts[:, :nd], pts[:, nd:]

    def evaluate_domain(self, rt_values: RuntimeValues = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """All domain points and their results: (dims [N, nd], symbols [N, ns], results [N, nr])."""
        d, s = self.domain_points(rt_values)
        cols = [np.broadcast_to(np.asarray(v, np.int64), (d.shape[0],))
                for v in self.evaluate(list(d.T), list(s.T))]
        res = np.stack(cols, axis=1) if cols else np.zeros((d.shape[0], 0), np.int64)
        return d, s, res

    # -- equality and printing ---------------------------------------------------------------
    def _signature(self):
        return (self.is_undefined, self.is_known_empty, self.results,
                tuple(v.bounds for v in self.dim_vars), tuple(v.bounds for v in self.range_vars),
                tuple(v.bounds for v in self.rt_vars), frozenset(self._constraints.items()))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, IndexingMap):
            return NotImplemented
        return self._signature() == other._signature()

    def __hash__(self) -> int:
        return hash(self._signature())

    def __mul__(self, producer: IndexingMap) -> IndexingMap:
        return compose_indexing_maps(self, producer)

    def var_names(self) -> tuple[list[str], list[str], list[str]]:
        dims = [v.name or f"d{i}" for i, v in enumerate(self.dim_vars)]
        ranges = [v.name or f"s{i}" for i, v in enumerate(self.range_vars)]
        rts = [v.name or f"rt{i}" for i, v in enumerate(self.rt_vars)]
        return dims, ranges, rts

    def to_string(self, multiline: bool = False) -> str:
        if self.is_undefined:
            return "UNDEFINED"
        if self.is_known_empty:
            return "KNOWN EMPTY"
        dn, rn, tn = self.var_names()
        sn = rn + tn
        head = "(" + ", ".join(dn) + ")"
        if rn:
            head += "[" + ", ".join(rn) + "]"
        if tn:
            head += "{" + ", ".join(tn) + "}"
        head += " -> (" + ", ".join(e.to_string(dn, sn) for e in self.results) + ")"
        if not (dn or sn):
            return head
        parts = [f"{n} in {v.bounds}" for n, v in zip(dn + sn, self.dim_vars + self.range_vars
                                                      + self.rt_vars)]
        parts += sorted(f"{e.to_string(dn, sn)} in {r}" for e, r in self._constraints.items())
        sep = ",\n" if multiline else ", "
        return head + sep + "domain:" + ("\n" if multiline else " ") + sep.join(parts)

    def __str__(self) -> str:
        return self.to_string()

    def __repr__(self) -> str:
        return f"IndexingMap({self.to_string()!r})"

    @staticmethod
    def parse(text: str) -> IndexingMap:
        from hlo_codegen.indexing.serialization import parse_indexing_map

        return parse_indexing_map(text)


def vars_from_sizes(sizes: Sequence[int], names: Sequence[str] = ()) -> tuple[Variable, ...]:
    names = list(names) + [""] * (len(sizes) - len(names))
    return tuple(Variable(Interval(0, int(s) - 1), n) for s, n in zip(sizes, names))


def compose_indexing_maps(first: IndexingMap, second: IndexingMap) -> IndexingMap:
    """`second ∘ first` (XLA's ComposeIndexingMaps): first maps A -> B, second maps B -> C.

    Symbols of the result: range vars of second, range vars of first, rt vars of second, rt
    vars of first. The domain gets first's constraints, second's constraints (rewritten in
    A's variables) and `first.results[i] in second.dim_bounds[i]`."""
    if first.is_undefined or second.is_undefined:
        return IndexingMap.undefined()
    if first.num_results != second.num_dims:
        raise ValueError(f"cannot compose: {first.num_results} results feed {second.num_dims} dimensions")
    n2r, n1r, n2t = len(second.range_vars), len(first.range_vars), len(second.rt_vars)
    first_syms = [sym(n2r + j) for j in range(n1r)]
    first_syms += [sym(n2r + n1r + n2t + j) for j in range(len(first.rt_vars))]
    second_syms = [sym(j) for j in range(n2r)] + [sym(n2r + n1r + j) for j in range(n2t)]
    first_results = [e.replace(None, first_syms) for e in first.results]
    composed = IndexingMap(
        (e.replace(first_results, second_syms) for e in second.results), first.dim_vars,
        second.range_vars + first.range_vars, second.rt_vars + first.rt_vars)
    if first.is_known_empty or second.is_known_empty:
        composed._reset_to_known_empty()
        return composed
    for expr, interval in second._constraints.items():
        composed._add_constraint(expr.replace(first_results, second_syms), interval)
    for expr, interval in first._constraints.items():
        composed._add_constraint(expr.replace(None, first_syms), interval)
    for expr, bound in zip(first_results, second.dim_bounds()):
        composed._add_constraint(expr, bound)
    return composed


def compose(consumer: IndexingMap, producer: IndexingMap) -> IndexingMap:
    """Alias of `compose_indexing_maps(consumer, producer)`: output -> producer's operand."""
    return compose_indexing_maps(consumer, producer)
