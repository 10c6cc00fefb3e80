"""hlo_common.hlo.graph: the one iterative walk the IR, the schedulers, the call graph and the
fusion rules share: its orders, shared visited sets, laziness, and depth past Python's limit."""

from __future__ import annotations

import sys

from hlo_common.hlo.graph import depth_first, post_order


class Node:
    def __init__(self, name: str, *succ: Node):
        self.name = name
        self.succ = list(succ)


def names(nodes) -> list[str]:
    return [n.name for n in nodes]


def succ(n: Node) -> list[Node]:
    return n.succ


#   a -> b -> d
#   a -> c -> d,  c -> e
D = Node("d")
E = Node("e")
B = Node("b", D)
C = Node("c", D, E)
A = Node("a", B, C)


def test_post_order_puts_each_node_after_what_it_reaches_first_successor_first():
    assert names(post_order([A], succ)) == ["d", "b", "e", "c", "a"]


def test_post_order_takes_each_start_in_order_and_each_node_once():
    assert names(post_order([C, B, A], succ)) == ["d", "e", "c", "b", "a"]


def test_a_shared_visited_set_leaves_out_what_an_earlier_walk_took():
    visited: set[int] = set()
    first = post_order([B], succ, visited)
    assert names(first) == ["d", "b"]
    assert names(post_order([A], succ, visited)) == ["e", "c", "a"]
    # ids seeded in advance are neither taken nor walked through
    assert names(post_order([A], succ, {id(C)})) == ["d", "b", "a"]


def test_depth_first_is_pre_order_and_lazy():
    assert names(depth_first([A], succ)) == ["a", "b", "d", "c", "e"]
    walk = depth_first([A], succ)
    assert next(walk).name == "a"  # nothing past what was asked for is walked
    assert names(depth_first([E, A], succ)) == ["e", "a", "b", "d", "c"]


def test_walks_go_deeper_than_the_recursion_limit():
    n = sys.getrecursionlimit() * 3
    node = Node("0")
    for i in range(1, n):
        node = Node(str(i), node)
    order = post_order([node], succ)
    assert len(order) == n and order[0].name == "0" and order[-1] is node
    assert sum(1 for _ in depth_first([node], succ)) == n
