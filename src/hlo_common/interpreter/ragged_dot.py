"""ragged-dot for the reference interpreter: a dot whose lhs ragged dimension is cut into groups.

Used by `linalg`'s ragged-dot handler. Each group is a run of consecutive positions along the lhs
ragged dimension (`group_sizes[..., g]` long, groups back to back from 0); in modes 1 and 2
positions past the last group take part in no product. The modes (as jax.lax.ragged_dot_general
documents them):

    1. ragged non-contracting dim: [b,m,k] x [g,b,k,n] -> [b,m,n]   (rows of group g use rhs[g])
    2. ragged contracting dim:     [b,m,k] x [b,k,n]   -> [g,b,m,n] (group g contracts its slice)
    3. ragged batch dim:           [b,m,k] x [b,k,n]   -> [b,m,n]

group_sizes is [b..., x..., g] in modes 1 and 2 (x = the lhs dims of the ragged dim's kind that
come before it) and [x..., g] in mode 3; a plain [g] is broadcast. Each group is one masked dot.
Mode 3 is an ordinary batched dot: jax.lax.ragged_dot_general computes it so, even for batch
positions past the last group.
"""

from __future__ import annotations

import numpy as np

from hlo_common.interpreter.numeric import dot_general, unsupported
from hlo_common.hlo.ir import HloInstruction


def ragged_dot(instr: HloInstruction, lhs: np.ndarray, rhs: np.ndarray, group_sizes: np.ndarray,
               dims, lhs_ragged: tuple[int, ...], rhs_group: tuple[int, ...]) -> np.ndarray:
    lb, rb, lc, rc = dims
    if len(lhs_ragged) != 1:
        raise unsupported(instr, "ragged-dot needs exactly one lhs ragged dimension")
    ragged = lhs_ragged[0]
    if ragged in lc:
        kind, outer = "contracting", [d for d in lc if d < ragged]
    elif ragged in lb:
        kind, outer = "batch", [d for d in lb if d < ragged]
    else:
        kind = "non-contracting"
        outer = [d for d in range(lhs.ndim) if d not in lb and d not in lc and d < ragged]
    gs_dims = ([] if kind == "batch" else list(lb)) + outer
    if group_sizes.ndim == 1:
        gs_dims = []
    elif group_sizes.ndim != len(gs_dims) + 1:
        raise unsupported(instr, f"group_sizes rank {group_sizes.ndim} does not fit the ragged {kind} mode")
    masks = _group_masks(lhs, group_sizes, gs_dims, ragged)
    if kind == "non-contracting":
        if len(rhs_group) != 1:
            raise unsupported(instr, "ragged non-contracting mode needs one rhs group dimension")
        gdim = rhs_group[0]
        renum = [d - (d > gdim) for d in range(rhs.ndim)]
        rb2, rc2 = tuple(renum[d] for d in rb), tuple(renum[d] for d in rc)
        out = None
        for g, mask in enumerate(masks):
            part = dot_general(lhs * mask, np.take(rhs, g, axis=gdim), lb, rb2, lc, rc2)
            out = part if out is None else out + part
        return out
    if rhs_group:
        raise unsupported(instr, f"ragged {kind} mode takes no rhs group dimension")
    if kind == "contracting":
        return np.stack([dot_general(lhs * m, rhs, lb, rb, lc, rc) for m in masks])
    return dot_general(lhs, rhs, lb, rb, lc, rc)  # batch groups: an ordinary dot (as jax computes it)


def _group_masks(lhs: np.ndarray, group_sizes: np.ndarray, gs_dims: list[int], ragged: int) -> list:
    """One boolean mask per group, broadcastable against lhs, selecting its ragged positions."""
    ends = np.cumsum(group_sizes, axis=-1)
    starts = ends - group_sizes
    shape = [1] * lhs.ndim
    for i, d in enumerate(gs_dims):
        shape[d] = lhs.shape[d]
    order = np.argsort(gs_dims) if gs_dims else []
    pos_shape = [1] * lhs.ndim
    pos_shape[ragged] = lhs.shape[ragged]
    pos = np.arange(lhs.shape[ragged]).reshape(pos_shape)
    masks = []
    for g in range(group_sizes.shape[-1]):
        s = starts[..., g].transpose(order).reshape(shape) if gs_dims else starts[..., g]
        e = ends[..., g].transpose(order).reshape(shape) if gs_dims else ends[..., g]
        masks.append((pos >= s) & (pos < e))
    return masks
