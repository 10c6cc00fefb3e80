"""Typed HLO attribute values and the table of how each attribute is parsed and printed.

`ATTR_KINDS` maps an attribute's text name to its kind; the parser reads a value of that kind and
the printer writes it back canonically (XLA's spelling, defaults omitted where XLA omits them).
Attributes not in the table are kept as `RawAttr` text and printed as they came. Every typed value
prints its canonical text with `str()`, so code that only needs the text can use `str(value)`.

    >>> str(Window.parse("size=3x3 stride=2x2 pad=1_1x1_1"))
    '{size=3x3 stride=2x2 pad=1_1x1_1}'
    >>> ReplicaGroups.parse_iota("[2,2]<=[4]").groups()
    [[0, 1], [2, 3]]
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from hlo_common.hlo.replica_groups import ReplicaGroups  # noqa: F401 - re-exported
from hlo_common.hlo.strings import (  # noqa: F401 - re-exported: older code imports them from here
    c_escape, c_unescape, format_backend_config, format_json, lexes_as_json_dict, parse_json_object,
    quote_string,
)


@dataclass(frozen=True)
class RawAttr:
    """An attribute this project keeps as text (e.g. `domain={kind="sharding" ...}`)."""

    text: str

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class WindowDim:
    size: int
    stride: int = 1
    padding_low: int = 0
    padding_high: int = 0
    window_dilation: int = 1  # rhs_dilate
    base_dilation: int = 1  # lhs_dilate
    window_reversal: bool = False


_WINDOW_FIELDS = ("size", "stride", "pad", "lhs_dilate", "rhs_dilate", "rhs_reversal")


@dataclass(frozen=True)
class Window:
    """`window={size=3x3 stride=2x2 pad=1_1x1_1 lhs_dilate=.. rhs_dilate=.. rhs_reversal=..}`."""

    dims: tuple[WindowDim, ...]

    @staticmethod
    def parse(text: str) -> Window:
        fields: dict[str, list[str]] = {}
        for part in text.split():
            key, eq, val = part.partition("=")
            if key not in _WINDOW_FIELDS or not eq:
                raise ValueError(f"unknown window field '{part}'")
            if key in fields:
                raise ValueError(f"window field '{key}' given twice")
            fields[key] = val.split("x")
        if fields and "size" not in fields:
            raise ValueError("a window needs 'size='")
        rank = len(fields.get("size", []))
        for key, vals in fields.items():
            if len(vals) != rank:
                raise ValueError(f"window field '{key}' has {len(vals)} entries, size has {rank}")

        def ints(key: str, default: int) -> list[int]:
            return [int(v) for v in fields[key]] if key in fields else [default] * rank

        size, stride = ints("size", 1), ints("stride", 1)
        lhs, rhs, rev = ints("lhs_dilate", 1), ints("rhs_dilate", 1), ints("rhs_reversal", 0)
        pads = []
        for p in fields.get("pad", ["0_0"] * rank):
            lo, sep, hi = p.partition("_")
            if not sep:
                raise ValueError(f"window pad '{p}' is not low_high")
            pads.append((int(lo), int(hi)))
        return Window(tuple(
            WindowDim(size[i], stride[i], pads[i][0], pads[i][1], rhs[i], lhs[i], bool(rev[i]))
            for i in range(rank)))

    def __str__(self) -> str:
        if not self.dims:
            return "{}"
        d = self.dims
        parts = ["size=" + "x".join(str(w.size) for w in d)]
        if any(w.stride != 1 for w in d):
            parts.append("stride=" + "x".join(str(w.stride) for w in d))
        if any(w.padding_low or w.padding_high for w in d):
            parts.append("pad=" + "x".join(f"{w.padding_low}_{w.padding_high}" for w in d))
        if any(w.base_dilation != 1 for w in d):
            parts.append("lhs_dilate=" + "x".join(str(w.base_dilation) for w in d))
        if any(w.window_dilation != 1 for w in d):
            parts.append("rhs_dilate=" + "x".join(str(w.window_dilation) for w in d))
        if any(w.window_reversal for w in d):
            parts.append("rhs_reversal=" + "x".join(str(int(w.window_reversal)) for w in d))
        return "{" + " ".join(parts) + "}"


@dataclass(frozen=True)
class ConvDimensionNumbers:
    """`b01f_01io->b01f`: batch/feature/spatial positions of input, kernel and output. A `?` is a
    dim the labels do not name: cuDNN's vectorized feature dim (NCHW_VECT_C) of int8 convolution
    calls, which XLA prints so (`b01f?_01i?o->b01f?`)."""

    input_batch: int
    input_feature: int
    input_spatial: tuple[int, ...]
    kernel_input_feature: int
    kernel_output_feature: int
    kernel_spatial: tuple[int, ...]
    output_batch: int
    output_feature: int
    output_spatial: tuple[int, ...]
    text: str

    @staticmethod
    def parse(text: str) -> ConvDimensionNumbers:
        lhs, arrow, out = text.partition("->")
        inp, us, ker = lhs.partition("_")
        if not arrow or not us:
            raise ValueError(f"malformed dim_labels '{text}'")
        nsp = sum(c.isdigit() for c in inp)
        if any(len(p) - p.count("?") != nsp + 2 for p in (inp, ker, out)):
            raise ValueError(f"dim_labels '{text}' has inconsistent ranks")

        def spatial(s: str, letters: str) -> tuple[int, ...]:
            pos = {}
            for i, c in enumerate(s):
                if c.isdigit():
                    pos[int(c)] = i
                elif c not in letters and c != "?":
                    raise ValueError(f"unsupported dim label '{c}' in '{text}'")
            if sorted(pos) != list(range(nsp)):
                raise ValueError(f"dim_labels '{text}' must name spatial dims 0..{nsp - 1} once each")
            return tuple(pos[k] for k in range(nsp))

        for part, letters in ((inp, "bf"), (ker, "io"), (out, "bf")):
            for ch in letters:
                if part.count(ch) != 1:
                    raise ValueError(f"dim_labels '{text}': '{part}' needs exactly one '{ch}'")
        return ConvDimensionNumbers(
            inp.index("b"), inp.index("f"), spatial(inp, "bf"), ker.index("i"), ker.index("o"),
            spatial(ker, "io"), out.index("b"), out.index("f"), spatial(out, "bf"), text,
        )

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class SliceSpec:
    """`slice={[0:2], [1:8:2]}` as (start, limit, stride) per dimension."""

    dims: tuple[tuple[int, int, int], ...]

    def __str__(self) -> str:
        # XLA prints the strides of every dimension, or of none when all are 1.
        if all(st == 1 for _s, _l, st in self.dims):
            return "{" + ", ".join(f"[{s}:{lim}]" for s, lim, _st in self.dims) + "}"
        return "{" + ", ".join(f"[{s}:{lim}:{st}]" for s, lim, st in self.dims) + "}"


@dataclass(frozen=True)
class PaddingConfig:
    """`padding=0_0x1_2_1` as (low, high, interior) per dimension."""

    dims: tuple[tuple[int, int, int], ...]

    @staticmethod
    def parse(text: str) -> PaddingConfig:
        dims = []
        for part in text.split("x"):
            vals = [int(v) for v in _split_signed(part)]
            if len(vals) == 2:
                vals.append(0)
            if len(vals) != 3:
                raise ValueError(f"malformed padding '{text}' (expected low_high[_interior] per dim)")
            dims.append(tuple(vals))
        return PaddingConfig(tuple(dims))

    def __str__(self) -> str:
        # XLA prints the interior padding of every dimension once any of them is non-zero.
        interior = any(it for _lo, _hi, it in self.dims)
        return "x".join(f"{lo}_{hi}" + (f"_{it}" if interior else "") for lo, hi, it in self.dims)


def _split_signed(part: str) -> list[str]:
    # "-1_2_0" -> ["-1", "2", "0"]; negative numbers keep their sign.
    return part.split("_")


@dataclass(frozen=True)
class SourceTargetPairs:
    """`source_target_pairs={{0,1},{1,0}}` (collective-permute)."""

    pairs: tuple[tuple[int, int], ...]

    def __str__(self) -> str:
        return "{" + ",".join(f"{{{s},{t}}}" for s, t in self.pairs) + "}"


@dataclass(frozen=True)
class OutputOperandAliasing:
    """`output_to_operand_aliasing={{0}: (0, {}), {1}: (1, {0})}`: output index -> (operand, index)."""

    entries: tuple[tuple[tuple[int, ...], int, tuple[int, ...]], ...]

    def __str__(self) -> str:
        def idx(t: tuple[int, ...]) -> str:
            return "{" + ",".join(map(str, t)) + "}"

        return "{" + ", ".join(f"{idx(o)}: ({n}, {idx(i)})" for o, n, i in self.entries) + "}"


@dataclass(frozen=True, eq=False)
class LiteralAttr:
    """A literal-valued attribute, e.g. custom-call `literal=s32[] 1` (shape, then the value)."""

    shape: Any  # hlo_common.hlo.shape.Shape
    value: Any  # numpy array or tuple of them

    def __str__(self) -> str:
        from hlo_common.hlo.literal import format_literal

        # The layout is printed so that `s32[2]{0} {3, 4}` cannot read `{3, 4}` as a layout.
        return f"{self.shape} {format_literal(self.value, self.shape)}"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LiteralAttr) and str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))


# Kind of every attribute the parser types. Order = canonical print order of opcode-specific
# attributes (roughly XLA's); computation attributes and the common ones come after these.
ATTR_KINDS: dict[str, str] = {
    "kind": "word",
    "iota_dimension": "int",
    "index": "int",
    "slice": "slice",
    "dynamic_slice_sizes": "ints",
    "padding": "padding",
    "window": "window",
    "dim_labels": "dim_labels",
    "lhs_batch_dims": "ints",
    "lhs_contracting_dims": "ints",
    "rhs_batch_dims": "ints",
    "rhs_contracting_dims": "ints",
    "lhs_ragged_dims": "ints",
    "rhs_group_dims": "ints",
    "feature_group_count": "int",
    "batch_group_count": "int",
    "operand_precision": "words",
    "dimensions": "ints",
    "direction": "word",
    "type": "word",
    "offset_dims": "ints",
    "collapsed_slice_dims": "ints",
    "start_index_map": "ints",
    "operand_batching_dims": "ints",
    "start_indices_batching_dims": "ints",
    "update_window_dims": "ints",
    "inserted_window_dims": "ints",
    "scatter_dims_to_operand_dims": "ints",
    "input_batching_dims": "ints",
    "scatter_indices_batching_dims": "ints",
    "index_vector_dim": "int",
    "slice_sizes": "ints",
    "indices_are_sorted": "bool",
    "unique_indices": "bool",
    "is_stable": "bool",
    "k": "int",
    "largest": "bool",
    "exponent_bits": "int",
    "mantissa_bits": "int",
    "distribution": "word",
    "algorithm": "word",
    "fft_type": "word",
    "fft_length": "ints",
    "epsilon": "float",
    "feature_index": "int",
    "left_side": "bool",
    "lower": "bool",
    "unit_diagonal": "bool",
    "transpose_a": "word",
    "delta": "int",
    "channel_id": "int",
    "replica_groups": "replica_groups",
    "source_target_pairs": "pairs",
    "use_global_device_ids": "bool",
    "constrain_layout": "bool",
    "custom_call_target": "string",
    "operand_layout_constraints": "shapes",
    "custom_call_has_side_effect": "bool",
    "literal": "literal",
    "output_to_operand_aliasing": "aliasing",
    "schedule": "word",
    "api_version": "word",
    "padding_type": "word",
    "is_host_transfer": "bool",
    "is_composite": "bool",
    "infeed_config": "string",
    "outfeed_config": "string",
    "outfeed_shape": "shape",
    "async_execution_thread": "string",
    "num_carries": "int",
}

# Attributes whose value names called computations.
COMPUTATION_ATTR_KINDS = {
    "calls": "comp_or_comps",
    "to_apply": "comp",
    "condition": "comp",
    "body": "comp",
    "select": "comp",
    "scatter": "comp",
    "true_computation": "comp",
    "false_computation": "comp",
    "branch_computations": "comps",
    "called_computations": "comps",
}

# Common attributes printed after opcode-specific ones, in this order.
COMMON_ATTR_ORDER = (
    "sharding", "frontend_attributes", "origin", "statistics", "control-predecessors",
    "metadata", "backend_config",
)

# Metadata fields in the order XLA's OpMetadataToString prints them (strings are quoted).
METADATA_ORDER = (
    "op_type", "op_name", "source_file", "source_line", "source_end_line", "source_column",
    "source_end_column", "profile_type", "deduplicated_name", "scheduling_name", "stack_frame_id",
)

_ORDER = {name: i for i, name in enumerate(ATTR_KINDS)}


def attr_sort_key(name: str) -> tuple[int, int, str]:
    """Canonical order: typed attributes in table order, then others alphabetically."""
    if name in _ORDER:
        return (0, _ORDER[name], name)
    return (1, 0, name)


# -- values ---------------------------------------------------------------------------------------
def format_attr_value(kind: str | None, value: Any) -> str:
    if kind == "ints":
        return "{" + ",".join(str(v) for v in value) + "}"
    if kind == "words":
        return "{" + ",".join(str(v) for v in value) + "}"
    if kind == "int":
        return str(value)
    if kind == "bool":
        return "true" if value else "false"
    if kind == "float":
        return format_float_attr(value)
    if kind == "string":
        return quote_string(value)
    if kind == "shapes":
        return "{" + ", ".join(str(s) for s in value) + "}"
    return str(value)


def format_float_attr(v: float) -> str:
    text = repr(float(v))
    if text.endswith(".0"):
        text = text[:-2]
    return text
