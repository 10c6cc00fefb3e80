"""Analyses of a whole module that more than one tool needs (XLA's `xla/hlo/analysis`).

Where they sit: hlo-opt's `copy-insertion` and `hlo-memory-scheduler` passes run them on the
optimized module; hlo-codegen's buffer assignment runs them again on what hlo-opt printed.

- `call_graph`: global (control-flow) vs embedded (in-kernel) computations, XLA's post orders,
  call sites and nesting (`CallGraph`).
- `dataflow`: `HloDataflowAnalysis`, the `HloValue`s of the global computations (non-SSA value
  sets as buffer assignment wants them, or SSA form with phi values as copy insertion wants them).
- `alias`: `HloAliasAnalysis`, values that share one `HloBuffer`.
- `live_range`: `HloLiveRange`, the flattened schedule and each value's [start, end].
- `sharing`: in-place pairs and `can_share_operand_buffer_with_user`.
- `reachability` / `ordering`: which instruction must run before which (XLA's `HloReachabilityMap`,
  `DependencyHloOrdering`), for copy removal.
- `copy_insertion`: the schedule-specific copy insertion hlo-codegen applies to modules that did
  not come through hlo-opt.
"""
