"""Thread-id to output-index maps of the loop emitter (XLA's `GetDefaultThreadIdIndexingMap`).

Where it sits: the loop emitter (and the concatenate / DUS emitters) compose this map with the
fusion's output-to-input maps to know which elements each thread reads and writes. The map has
six dimensions `(th_x, th_y, th_z, bl_x, bl_y, bl_z)` and two range symbols
`[chunk_id, unroll_id]`:

    linear = ((bl_x * threads_x + th_x) + y and z terms) * unroll
             + chunk_id * unroll * total_threads + unroll_id

delinearized minor-to-major over the output shape's layout, with the domain restricted to
`linear < num_elements` (expressed without `unroll_id` when the unroll factor divides the element
count). Dimensions and symbols with one value simplify away; `remove_unused_vars()` drops them.

    >>> m = default_thread_id_indexing_map(LaunchDimensions((32,), (1,)), 1, (4, 8))
    >>> str(m.remove_unused_vars())
    '(th_x) -> (th_x floordiv 8, th_x mod 8), domain: th_x in [0, 31]'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from hlo_codegen.indexing.affine import AffineExpr, const, dim, sym
from hlo_codegen.indexing.indexing_map import IndexingMap, Variable
from hlo_codegen.indexing.interval import Interval
from hlo_common.hlo.shape import Layout, Shape

THREAD_DIM_NAMES = ("th_x", "th_y", "th_z", "bl_x", "bl_y", "bl_z")
THREAD_SYMBOL_NAMES = ("chunk_id", "unroll_id")


@dataclass(frozen=True)
class LaunchDimensions:
    """Threads per block and blocks per grid; missing y/z entries are 1."""

    threads: tuple[int, ...]
    blocks: tuple[int, ...]

    def threads_xyz(self) -> tuple[int, int, int]:
        return tuple((list(self.threads) + [1, 1, 1])[:3])

    def blocks_xyz(self) -> tuple[int, int, int]:
        return tuple((list(self.blocks) + [1, 1, 1])[:3])

    @property
    def launch_bound(self) -> int:
        """Total number of threads in the grid."""
        t, b = self.threads_xyz(), self.blocks_xyz()
        return t[0] * t[1] * t[2] * b[0] * b[1] * b[2]


def grid_dim_vars(launch: LaunchDimensions) -> tuple[Variable, ...]:
    sizes = launch.threads_xyz() + launch.blocks_xyz()
    return tuple(Variable(Interval(0, n - 1), name) for n, name in zip(sizes, THREAD_DIM_NAMES))


def linear_thread_id(launch: LaunchDimensions) -> AffineExpr:
    """Linear id of a thread in the grid from the six thread/block dimensions."""
    threads, blocks = launch.threads_xyz(), launch.blocks_xyz()
    linear, stride = const(0), 1
    for i in range(3):
        coord = dim(i) + dim(3 + i) * threads[i]
        linear = linear + coord * stride
        stride *= threads[i] * blocks[i]
    return linear


def default_thread_id_indexing_map(launch: LaunchDimensions, unroll_factor: int,
                                   shape: Shape | Sequence[int]) -> IndexingMap:
    """Thread (and unrolled element) to output index for a loop over `shape`, simplified."""
    if not isinstance(shape, Shape):
        shape = Shape.array("f32", tuple(shape))
    dims = shape.dims
    num_elements = shape.num_elements
    thread_linear = linear_thread_id(launch)
    chunk_id, unroll_id = sym(0), sym(1)
    linear = (thread_linear * unroll_factor + chunk_id * (unroll_factor * launch.launch_bound)
              + unroll_id)
    results: list[AffineExpr] = [const(0)] * len(dims)
    divisor = 1
    layout = shape.layout if shape.layout is not None else Layout.default(len(dims))
    for d in layout.minor_to_major:
        results[d] = linear.floordiv(divisor) % dims[d]
        divisor *= dims[d]
    chunks = -(-num_elements // (launch.launch_bound * unroll_factor))
    range_vars = (Variable(Interval(0, chunks - 1), THREAD_SYMBOL_NAMES[0]),
                  Variable(Interval(0, unroll_factor - 1), THREAD_SYMBOL_NAMES[1]))
    m = IndexingMap(results, grid_dim_vars(launch), range_vars)
    if num_elements % unroll_factor == 0:
        m = m.with_constraint(linear.replace(None, [chunk_id, const(0)]),
                              Interval(0, num_elements - unroll_factor))
    else:
        m = m.with_constraint(linear, Interval(0, num_elements - 1))
    return m.simplify()
