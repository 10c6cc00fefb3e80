"""Shardings (`hlo_common/hlo/sharding.py`, `tile_assignment.py`): parsed and printed as XLA's own
parser and printer do (checked against jax's XLA on every form, the normalizations included),
device arrays as XLA defines them, and XLA's HloSharding::Validate in the verifier."""

from __future__ import annotations

import re

import numpy as np
import pytest

from hlo_common.errors import HloParseError, VerificationError
from hlo_common.hlo.parser import parse_module
from hlo_common.hlo.printer import print_module
from hlo_common.hlo.sharding import HloSharding
from hlo_common.hlo.tile_assignment import ShardingError
from hlo_common.hlo.verifier import verify_module

# (shape, sharding as written); XLA decides what each prints as, or that it is refused
XLA_CASES = [
    ("f32[8,4]", "{replicated}"), ("f32[8,4]", "{manual}"), ("f32[8,4]", "{unknown}"),
    ("f32[8,4]", "{maximal device=3 shard_as 2}"),
    ("f32[8,4]", '{replicated shard_like 1 metadata={op_name="a" source_file="b.py" source_line=3}}'),
    ("f32[8,4]", "{devices=[8,1]0,1,2,3,4,5,6,7}"), ("f32[8,4]", "{devices=[2,4]<=[2,2,2]T(2,0,1)}"),
    ("f32[8,4]", "{devices=[2,4]<=[2,2,2]T(0,2,1)}"), ("f32[8,4]", "{devices=[2,4]<=[1,8,1]T(2,1,0)}"),
    ("f32[8,4]", "{devices=[2,1,4]<=[2,2,2]T(0,1,2) last_tile_dim_replicate}"),
    ("f32[8,4]", '{devices=[2,1,4]<=[1,2,4,1]T(2,1,0,3) last_tile_dim_replicate metadata={op_name="x"}}'),
    ("f32[8,4]", "{devices=[2,1,4]<=[4,2]T(1,0) last_tile_dim_replicate}"),
    ("f32[8,4]", "{devices=[2,1,4]3,2,1,0,7,6,5,4 last_tile_dim_replicate}"),
    ("f32[8,4]", "{devices=[1,1,8]<=[8] last_tile_dim_replicate}"),
    ("f32[8,4]", "{devices=[2,4,1]<=[8] last_tile_dim_replicate}"),
    ("f32[8,4]", "{devices=[2,2,2]<=[2,2,2]T(1,2,0) last_tile_dim_replicate}"),
    ("f32[8,4]", "{devices=[2,1,4]<=[2,2,2]T(2,0,1) last_tile_dim_replicate}"),
    ("f32[8,4]", "{devices=[4,1,2]<=[8] last_tile_dims={manual}}"),
    ("f32[8,4]", "{devices=[1,1,8]<=[8] last_tile_dims={manual}}"),
    ("f32[8,4]", "{devices=[2,1,4]<=[8] last_tile_dims={replicated}}"),
    ("f32[8,4]", "{devices=[2,2,2]<=[8] last_tile_dims={manual, replicated}}"),
    ("f32[8,4]", "{devices=[2,1,2,2]<=[8] last_tile_dims={replicated, manual}}"),
    ("f32[8,4]", "{devices=[2,1,2,2]<=[2,2,2]T(2,1,0) last_tile_dims={manual, manual}}"),
    ("f32[8,4]", "{devices=[2,1,1,4]<=[8] last_tile_dims={replicated, manual}}"),
    ("f32[8,4]", '{devices=[2,2]<=[4] metadata={{op_name="a"}, {op_name="b"}}}'),
    ("(f32[8,4], f32[2])", "{{replicated}, {maximal device=0}}"),
    ("(f32[8,4], f32[2], f32[2], f32[2], f32[2], f32[2])",
     "{{replicated}, {replicated}, {replicated}, {replicated}, {replicated}, {manual}}"),
    ("f32[8,4]", "{devices=[4,1,2]<=[8]T(0) last_tile_dims={manual}}"),
    ("f32[8,4]", "{devices=[4,1,2]<=[3,...]}"),
]


def _module(shape: str, sharding: str, partitions: int = 8) -> str:
    return (f"HloModule m, num_partitions={partitions}\nENTRY e {{\n  ROOT p = {shape} parameter(0), "
            f"sharding={sharding}\n}}\n")


def _xla_prints(shape: str, sharding: str) -> str | None:
    """The sharding as XLA prints it back, None when XLA's parser refuses it."""
    from jax._src.lib import xla_client as xc

    try:
        text = xc.hlo.hlo_module_from_text(_module(shape, sharding)).to_string()
    except Exception:  # noqa: BLE001 - XLA's parse error, whatever its type
        return None
    line = next(line for line in text.splitlines() if "parameter(0)" in line)
    return re.search(r"sharding=(\{.*\})\s*$", line).group(1)


@pytest.mark.parametrize("shape,sharding", XLA_CASES, ids=[c[1][:60] for c in XLA_CASES])
def test_shardings_print_as_xla_prints_them(shape, sharding):
    pytest.importorskip("jax")
    want = _xla_prints(shape, sharding)
    if want is None:
        with pytest.raises(HloParseError, match=r"sharding"):
            parse_module(_module(shape, sharding))
        return
    module = parse_module(_module(shape, sharding))
    assert str(module.entry.root.sharding) == want
    assert f"sharding={want}" in print_module(module)


def test_normalized_forms_keep_their_devices():
    """A normalization may rewrite the iota or sort replication groups, never move a tile."""
    for text, rows in [
        ("{devices=[2,1,4]<=[4,2]T(1,0) last_tile_dim_replicate}", [[0, 2, 4, 6], [1, 3, 5, 7]]),
        ("{devices=[2,1,4]3,2,1,0,7,6,5,4 last_tile_dim_replicate}", [[0, 1, 2, 3], [4, 5, 6, 7]]),
        ("{devices=[2,2]<=[2,2]T(1,0)}", [[0, 2], [1, 3]]),
    ]:
        ids = HloSharding.parse(text).tiles.array()
        assert ids.reshape(len(rows), -1).tolist() == rows, text


# (module header, shape, sharding, the verifier's complaint or None)
VALIDATION_CASES = [
    ("num_partitions=4", "f32[8,4]", "{devices=[2,2]<=[4]}", None),
    ("num_partitions=4", "f32[8,4]", "{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}", None),
    ("num_partitions=4", "(f32[8,4], f32[2])", "{{replicated}, {maximal device=3}}", None),
    ("", "f32[8,4]", "{devices=[16,1]<=[16]}", None),  # no device count in the header: not checked
    ("num_partitions=4", "f32[8]", "{devices=[2,2]<=[4]}", "tiles 2 dims, the shape f32[8]"),
    ("num_partitions=4", "f32[8,4]", "{devices=[4,2]<=[8]}", "has 8 devices, the module 4"),
    ("num_partitions=4", "f32[8,4]", "{devices=[2,2]0,1,2,2}", "device 2 appears twice"),
    ("num_partitions=4", "f32[8,4]", "{devices=[2,2]0,1,2,7}", "device 7 is outside"),
    ("num_partitions=4", "f32[8,4]", "{maximal device=4}", "device 4 is outside"),
    ("num_partitions=4", "f32[8,4]", "{devices=[1,1]0}", "has a single device"),
    ("num_partitions=4", "(f32[8,4], f32[2])", "{{replicated}}", "has 2 leaves while sharding"),
    ("num_partitions=4", "f32[8,4]", "{{replicated}, {replicated}}", "is a tuple but the shape"),
]


@pytest.mark.parametrize("header,shape,sharding,problem", VALIDATION_CASES)
def test_the_verifier_validates_shardings_as_xla(header, shape, sharding, problem):
    text = f"HloModule m{', ' + header if header else ''}\nENTRY e {{\n  ROOT p = {shape} parameter(0), " \
           f"sharding={sharding}\n}}\n"
    module = parse_module(text, "m.hlo")
    if problem is None:
        verify_module(module)
        return
    with pytest.raises(VerificationError, match=r"%p.*invalid sharding: .*" + re.escape(problem)):
        verify_module(module)


def test_bad_sharding_text_is_a_located_parse_error():
    with pytest.raises(HloParseError,
                       match=r"m\.hlo:2:\d+: .*unknown sharding attribute 'last_tile_dim_replicat'"):
        parse_module("ENTRY e {\n  ROOT p = f32[4] parameter(0), sharding={devices=[2,2]<=[4] "
                     "last_tile_dim_replicat}\n}\n", "m.hlo")
    with pytest.raises(HloParseError, match=r"needs 4 devices, 3 are listed"):
        parse_module("ENTRY e { ROOT p = f32[4] parameter(0), sharding={devices=[2,2]0,1,2} }")
    with pytest.raises(ShardingError, match=r"not a permutation"):
        HloSharding.parse("{devices=[4]<=[2,2]T(0,0)}")


def test_tile_arrays_follow_xlas_iota_definition():
    """devices=[4,2]<=[2,4]T(1,0): ids 0..7 as [2,4], transposed to [4,2] (XLA's ToArray)."""
    ids = HloSharding.parse("{devices=[4,2]<=[2,4]T(1,0)}").tiles.array()
    np.testing.assert_array_equal(ids, np.arange(8).reshape(2, 4).T)
