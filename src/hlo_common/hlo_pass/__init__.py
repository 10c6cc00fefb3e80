"""The pass framework all three tools share (XLA's `xla/hlo/pass`): `HloPass` and the registry
(`pass_base`), pipelines and fixed points (`pipeline`)."""
