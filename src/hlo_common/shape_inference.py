"""Shape inference (placeholder until the full table lands)."""


def infer_shape(instr):
    raise NotImplementedError("shape inference not available")
