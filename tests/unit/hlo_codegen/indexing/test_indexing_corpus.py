"""Output-to-input indexing of every instruction (and every fusion, through its fused computation)
of XLA's test corpus: nothing but `IndexingError` may escape, and the fusion maps read in bounds.

The default run covers a fixed sample of the corpus; the whole corpus is marked slow.
"""

from __future__ import annotations

import numpy as np
import pytest

from corpus_lib import corpus_modules, require_corpus
from hlo_codegen.indexing import compute_output_to_input_indexing
from hlo_common.errors import HloError
from hlo_common.hlo.parser import parse_module

SAMPLE_EVERY = 10
MAX_POINTS_CHECKED = 4096


def output_ids(instr):
    if instr.shape.is_tuple and instr.opcode in ("reduce", "reduce-window", "fusion"):
        return range(len(instr.shape.tuple_shapes))
    return [] if instr.shape.is_tuple or instr.opcode == "tuple" else [0]


def check_in_bounds(instr, output_id, indexing):
    """Every point of every defined, symbol-free, small fusion map reads inside its operand."""
    for operand, group in zip(instr.operands, indexing.indexing_maps):
        for oi in group:
            m = oi.map
            if m.is_undefined or m.is_known_empty or m.num_symbols or operand.shape.is_tuple:
                continue
            if np.prod([b.num_elements for b in m.dim_bounds()]) > MAX_POINTS_CHECKED:
                continue
            _, _, r = m.evaluate_domain()
            dims = np.array(operand.shape.dims, np.int64)
            assert np.all((r >= 0) & (r < dims)), f"%{instr.name} output {output_id} reads {m}"


def run_module(text: str) -> int:
    try:
        module = parse_module(text)
    except HloError:
        return 0
    count = 0
    for comp in module.computations:
        for instr in comp.instructions:
            for output_id in output_ids(instr):
                indexing = compute_output_to_input_indexing(instr, output_id)
                if instr.opcode == "fusion":
                    check_in_bounds(instr, output_id, indexing)
                count += 1
    return count


def test_corpus_sample():
    require_corpus()
    modules = corpus_modules()[::SAMPLE_EVERY]
    assert sum(run_module(text) for _, text in modules) > 1000


@pytest.mark.slow
def test_whole_corpus():
    require_corpus()
    assert sum(run_module(text) for _, text in corpus_modules()) > 20000
