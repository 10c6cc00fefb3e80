"""Per-(opcode, element type) costs of elementwise ops in "clock cycles" per element, measured by
XLA's op profiler (`xla/service/gpu/model/hlo_op_profiles_data.h`), for the GPU cost analysis.

Where it sits: `hlo_opt.gpu_model.cost_analysis` multiplies these by element counts to get an
op's flops. Keys are compute capabilities (`sm_90` H100, `sm_86` RTX A6000, `sm_80` A100); an (opcode,
type) not in the device's table costs `DEFAULT_FLOPS_PER_ELEMENT` (XLA's
kDefaultFlopsPerElement); a capability without a table uses the sm_86 one, as XLA does. The
sm_86 and sm_80 tables are sparse in XLA too (ops whose cost was not measured as different from
the default are absent), so on A100 e.g. an f32 add or exponential costs 3.

    >>> flops_per_element("sm_90", "exponential", "f32"), flops_per_element("sm_80", "add", "f32")
    (79, 3)
"""

from __future__ import annotations

DEFAULT_FLOPS_PER_ELEMENT = 3

# Read from openxla/xla hlo_op_profiles_data.h (sm_90: H100 80GB HBM3; sm_86: RTX A6000;
# sm_80: A100-SXM4-40GB).
_SM_90 = {
    "s8": {"divide": 356, "multiply": 7, "power": 122},
    "s16": {"divide": 364, "multiply": 7, "power": 122},
    "s32": {"divide": 297, "multiply": 3, "power": 71},
    "s64": {"divide": 685, "multiply": 11, "power": 253},
    "u8": {"divide": 300, "multiply": 7, "power": 122},
    "u16": {"divide": 304, "multiply": 7, "power": 126},
    "u32": {"divide": 122, "multiply": 3, "power": 71},
    "u64": {"divide": 629, "multiply": 11, "power": 253},
    "f16": {"cbrt": 201, "cosine": 997, "exponential": 102, "exponential-minus-one": 217, "log": 182,
        "log-plus-one": 245, "rsqrt": 95, "sine": 993, "sqrt": 95, "tanh": 502, "add": 7, "atan2": 451,
        "divide": 43, "multiply": 7, "power": 526, "subtract": 7},
    "f32": {"cbrt": 178, "cosine": 978, "exponential": 79, "exponential-minus-one": 190, "log": 166,
        "log-plus-one": 229, "rsqrt": 75, "sine": 958, "sqrt": 75, "tanh": 467, "add": 7, "atan2": 431,
        "divide": 19, "multiply": 3, "power": 510, "subtract": 7},
    "f64": {"cbrt": 586, "cosine": 558, "exponential": 376, "exponential-minus-one": 712, "log": 815,
        "log-plus-one": 1259, "rsqrt": 277, "sine": 554, "sqrt": 332, "tanh": 431, "add": 15,
        "atan2": 930, "divide": 526, "multiply": 15, "power": 2205, "subtract": 15},
    "c64": {"cosine": 2415, "exponential": 641, "exponential-minus-one": 2055, "log": 756,
        "log-plus-one": 633, "rsqrt": 3148, "sine": 2324, "sqrt": 4344, "tanh": 2379, "add": 7,
        "atan2": 6462, "divide": 498, "multiply": 79, "power": 5532, "subtract": 7},
    "c128": {"cosine": 1750, "exponential": 1342, "exponential-minus-one": 1275, "log": 2455,
        "log-plus-one": 2403, "rsqrt": 5500, "sine": 1999, "sqrt": 6636, "tanh": 4613, "add": 15,
        "atan2": 13131, "divide": 2280, "multiply": 39, "power": 8363, "subtract": 15},
}

_SM_86 = {
    "s8": {"divide": 370, "power": 392},
    "s16": {"divide": 367, "power": 396},
    "s32": {"divide": 306},
    "s64": {"divide": 918, "power": 601},
    "u8": {"divide": 306, "power": 388},
    "u16": {"divide": 302, "power": 399},
    "u32": {"divide": 115},
    "u64": {"divide": 838, "power": 604},
    "f16": {"cbrt": 925, "cosine": 691, "exponential": 108, "exponential-minus-one": 396, "log": 266,
        "log-plus-one": 284, "logistic": 226, "rsqrt": 97, "sqrt": 97, "tanh": 212, "atan2": 482,
        "power": 975},
    "f32": {"cbrt": 867, "cosine": 662, "exponential": 86, "exponential-minus-one": 381, "log": 244,
        "log-plus-one": 262, "logistic": 176, "rsqrt": 75, "sine": 662, "sqrt": 75, "tanh": 190,
        "atan2": 486, "power": 925},
    "f64": {"cbrt": 6339, "cosine": 1717, "exponential": 1652, "exponential-minus-one": 1900, "log": 608,
        "log-plus-one": 2073, "logistic": 2412, "rsqrt": 698, "sine": 1789, "sqrt": 986, "tanh": 1609,
        "add": 97, "atan2": 3747, "divide": 2016, "multiply": 97, "power": 5511, "subtract": 97},
    "c64": {"exponential": 1360, "exponential-minus-one": 1400, "log": 950, "log-plus-one": 842,
        "rsqrt": 2383, "sqrt": 3193, "atan2": 5353, "divide": 687, "power": 3351},
    "c128": {"cosine": 6613, "exponential": 4028, "exponential-minus-one": 4161, "log": 7599,
        "log-plus-one": 6962, "rsqrt": 11318, "sine": 5878, "sqrt": 15606, "tanh": 9939, "add": 97,
        "atan2": 39027, "divide": 7941, "multiply": 270, "power": 18205, "subtract": 97},
}

_SM_80 = {
    "s8": {"divide": 417},
    "s16": {"divide": 468},
    "s64": {"divide": 1094},
    "u8": {"divide": 420, "power": 417},
    "u16": {"divide": 391, "power": 454},
    "u64": {"divide": 908, "power": 744},
    "f16": {"cbrt": 1195, "log": 321, "log-plus-one": 346, "sqrt": 124, "tanh": 499},
    "f32": {"log": 259, "tanh": 504, "power": 1221},
    "f64": {"cbrt": 1638, "exponential-minus-one": 572, "log": 699, "log-plus-one": 1223, "rsqrt": 329,
        "sine": 597, "sqrt": 397, "tanh": 733, "atan2": 1080, "divide": 831, "power": 1861},
    "c64": {"log": 1037, "log-plus-one": 1029, "atan2": 6618, "power": 4131},
    "c128": {"cosine": 2309, "log": 2371, "log-plus-one": 2405, "rsqrt": 3945, "sine": 2284,
        "sqrt": 5304, "tanh": 3618, "atan2": 13564, "divide": 3037, "power": 6054},
}


def _flatten(table: dict) -> dict[tuple[str, str], int]:
    return {(op, dtype): cycles for dtype, ops in table.items() for op, cycles in ops.items()}


OP_PROFILES: dict[str, dict[tuple[str, str], int]] = {
    "sm_90": _flatten(_SM_90), "sm_86": _flatten(_SM_86), "sm_80": _flatten(_SM_80)}
FALLBACK_ARCH = "sm_86"  # XLA's default profile for a capability without a table


def profile_for(arch: str) -> dict[tuple[str, str], int]:
    """The (opcode, element type name) -> cycles table of a compute capability (`sm_90`)."""
    return OP_PROFILES.get(arch, OP_PROFILES[FALLBACK_ARCH])


def flops_per_element(arch: str, opcode: str, dtype: str) -> int:
    return profile_for(arch).get((opcode, dtype), DEFAULT_FLOPS_PER_ELEMENT)
