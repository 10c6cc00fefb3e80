"""The graph walks of the IR, written once: depth-first with an explicit stack (HLO graphs are
deeper than Python's recursion limit), over any nodes and any successor function, e.g.
instructions through their operands, computations through their callees.

    >>> post_order([root], lambda i: i.operands)          # operands before users, root last
    >>> set(map(id, depth_first([entry], callees)))       # what the entry reaches

Nodes are tracked by `id()`, so they need no hash and nothing depends on hashing order. Where it
sits: `ir.py` orders instructions and computations with it, the call graph, the schedulers, the
interpreter's plans and the fusion rules walk with it.
"""

from __future__ import annotations

from typing import Callable, Iterable, Iterator, Sequence, TypeVar

T = TypeVar("T")


def post_order(starts: Iterable[T], successors: Callable[[T], Sequence[T]],
               visited: set[int] | None = None) -> list[T]:
    """Every node reachable from `starts` once, each after the nodes it reaches (first successor
    first, starts in order). `visited` (node ids) may be shared between walks: a node an earlier
    walk took is neither taken nor walked through again."""
    seen = set() if visited is None else visited
    order: list[T] = []
    for start in starts:
        if id(start) in seen:
            continue
        stack: list[tuple[T, bool]] = [(start, False)]
        while stack:
            node, expanded = stack.pop()
            if expanded:
                order.append(node)
                continue
            if id(node) in seen:
                continue
            seen.add(id(node))
            stack.append((node, True))
            for nxt in reversed(successors(node)):
                if id(nxt) not in seen:
                    stack.append((nxt, False))
    return order


def depth_first(starts: Iterable[T], successors: Callable[[T], Sequence[T]],
                visited: set[int] | None = None) -> Iterator[T]:
    """Every node reachable from `starts` once, each before the nodes it reaches (depth first,
    first start and first successor first); lazily, so a search can stop at what it looks for."""
    seen = set() if visited is None else visited
    stack = list(starts)
    stack.reverse()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        yield node
        stack.extend(reversed(successors(node)))


__all__ = ["depth_first", "post_order"]
