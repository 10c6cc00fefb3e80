"""Custom calls that only annotate a value (its sharding, memory space or layout) and pass it on:
the one list the interpreter, hlo-opt's sharding-remover and hlo-codegen's fusion wrapper share.

`Sharding` pins a sharding on a value (jax's with_sharding_constraint); the
`SPMDFullToShardShape`/`SPMDShardToFullShape` pair brackets a manual region; jax 0.10 (Shardy)
marks each function result with `xla.sdy.FuncResultSharding` (its sharding in the frontend
attribute `xla.sdy.sharding`, side-effecting only so that nothing removes it before the
partitioner). On one device each is its operand (XLA's ShardingRemover, and the Shardy import).
"""

from __future__ import annotations

SHARDING_MARKERS = frozenset({
    "Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape", "xla.sdy.FuncResultSharding",
})
ANNOTATION_TARGETS = SHARDING_MARKERS | frozenset({
    "annotate_device_placement", "MoveToHost", "MoveToDevice", "LayoutConstraint", "Pin", "Unpin",
})
