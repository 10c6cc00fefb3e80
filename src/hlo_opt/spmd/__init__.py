"""Helpers of hlo-opt's SPMD passes (`sharding-propagation`, `spmd-partitioning`, the Shardy
import): shardings as device arrays, the rules that carry a sharding through an instruction, and
the resharding collectives (XLA's xla/hlo/utils/hlo_sharding_util.cc and xla/service/spmd/)."""
