"""Modules as XLA:GPU's fusion pipeline starts on them for an H100 (jaxlib's XLA, triton GEMMs off,
metadata dropped), shared by the cost model's test against XLA's priority-fusion log
(tests/unit/hlo_opt/gpu_model/test_against_xla_dumps.py) and the fusion analysis' producer/consumer
test (tests/unit/hlo_common/gpu/test_fusion_analysis.py)."""

REGIONS = """
region_0.1 { col.2 = f32[] parameter(0) col.3 = f32[] parameter(1) ROOT s.1.0 = f32[] add(col.2, col.3) }
region_0.1.clone { col.0 = f32[] parameter(0) col.1 = f32[] parameter(1)
  ROOT s.0.0 = f32[] add(col.0, col.1) }
"""

M2 = REGIONS + """
ENTRY main.3 {
  p0.1 = f32[4096,512]{1,0} parameter(0)
  p1.1 = f32[4096,512]{1,0} parameter(1)
  a.1.0 = f32[4096,512]{1,0} add(p0.1, p1.1)
  t.1.0 = f32[4096,512]{1,0} tanh(a.1.0)
  p2.1 = f32[512]{0} parameter(2)
  b2.1.0 = f32[4096,512]{1,0} broadcast(p2.1), dimensions={1}
  m.1.0 = f32[4096,512]{1,0} multiply(t.1.0, b2.1.0)
  constant.1.0 = f32[] constant(0)
  col.5.0 = f32[512]{0} reduce(m.1.0, constant.1.0), dimensions={0}, to_apply=region_0.1
  p3.1 = f32[1024,2048]{1,0} parameter(3)
  log.1 = f32[1024,2048]{1,0} log(p3.1)
  negate.1 = f32[1024,2048]{1,0} negate(log.1)
  transpose.1.0 = f32[2048,1024]{1,0} transpose(negate.1), dimensions={1,0}
  sq.1.0 = f32[1024,2048]{1,0} sqrt(p3.1)
  row.5.0 = f32[1024]{0} reduce(sq.1.0, constant.1.0), dimensions={1}, to_apply=region_0.1.clone
  s.5.0 = f32[4096,256]{1,0} slice(m.1.0), slice={[0:4096], [0:256]}
  ex.1.0 = f32[4096,256]{1,0} exponential(s.5.0)
  ROOT tuple.1.0 = (f32[512]{0}, f32[2048,1024]{1,0}, f32[1024]{0}, f32[4096,256]{1,0}, f32[4096,512]{1,0})
    tuple(col.5.0, transpose.1.0, row.5.0, ex.1.0, m.1.0)
}"""

M3 = REGIONS + """
ENTRY main.3 {
  p0.1 = f32[2048,1024]{1,0} parameter(0)
  e.1.0 = f32[2048,1024]{1,0} exponential(p0.1)
  constant.1.0 = f32[] constant(0)
  col.5.0 = f32[1024]{0} reduce(e.1.0, constant.1.0), dimensions={0}, to_apply=region_0.1
  p1.1 = f32[1024]{0} parameter(1)
  dv.1.0 = f32[1024]{0} divide(col.5.0, p1.1)
  p2.1 = f32[64,128,256]{2,1,0} parameter(2)
  lg.1.0 = f32[64,128,256]{2,1,0} log(p2.1)
  r3.5.0 = f32[64,256]{1,0} reduce(lg.1.0, constant.1.0), dimensions={1}, to_apply=region_0.1.clone
  p3.1 = f32[8192,64]{1,0} parameter(3)
  idx.1 = s32[512,1]{1,0} parameter(4)
  gather.1 = f32[512,1,64]{2,1,0} gather(p3.1, idx.1), offset_dims={1,2}, collapsed_slice_dims={},
    start_index_map={0}, index_vector_dim=1, slice_sizes={1,64}
  gn.0.0 = f32[512,1,64]{2,1,0} negate(gather.1)
  bitcast.1 = f32[512,64]{1,0} bitcast(gn.0.0)
  p5.1 = f32[1000,512]{1,0} parameter(5)
  n5.1.0 = f32[1000,512]{1,0} negate(p5.1)
  p6.1 = f32[1000,300]{1,0} parameter(6)
  cc.1.0 = f32[1000,812]{1,0} concatenate(n5.1.0, p6.1), dimensions={1}
  sc.1.0 = f32[1000,812]{1,0} sine(cc.1.0)
  ROOT tuple.1.0 = (f32[1024]{0}, f32[64,256]{1,0}, f32[512,64]{1,0}, f32[1000,812]{1,0}, f32[2048,1024]{1,0})
    tuple(dv.1.0, r3.5.0, bitcast.1, sc.1.0, e.1.0)
}"""

M4 = """
region_0.1 { rb.2 = bf16[] parameter(0) rb.3 = bf16[] parameter(1) ROOT s.1.0 = bf16[] add(rb.2, rb.3) }
region_1.2.clone { rw.0 = f32[] parameter(0) rw.1 = f32[] parameter(1) ROOT s.0.0 = f32[] add(rw.0, rw.1) }
region_1.2 { rw.2 = f32[] parameter(0) rw.3 = f32[] parameter(1) ROOT s.3.0 = f32[] add(rw.2, rw.3) }
ENTRY main.4 {
  p2.1 = bf16[2048,4096]{1,0} parameter(2)
  convert.2 = f32[2048,4096]{1,0} convert(p2.1)
  b.1.0 = f32[2048,4096]{1,0} tanh(convert.2)
  convert.1.0 = bf16[2048,4096]{1,0} convert(b.1.0)
  constant.3.0 = bf16[] constant(0)
  rb.5.0 = bf16[2048]{0} reduce(convert.1.0, constant.3.0), dimensions={1}, to_apply=region_0.1
  p3.1 = f32[256,256]{1,0} parameter(3)
  constant.2.0 = f32[] constant(0)
  pd.1.0 = f32[256,260]{1,0} pad(p3.1, constant.2.0), padding=0_0x2_2
  ps.1.0 = f32[256,260]{1,0} sqrt(pd.1.0)
  p0.1 = f32[1024,1024]{1,0} parameter(0)
  p1.1 = f32[1024,1024]{1,0} parameter(1)
  x.1.0 = f32[1024,1024]{1,0} multiply(p0.1, p1.1)
  y1.1.0 = f32[1024,1024]{1,0} exponential(x.1.0)
  y2.1.0 = f32[1024,1024]{1,0} log(x.1.0)
  z.1.0 = f32[1024,1024]{1,0} add(y1.1.0, y2.1.0)
  p4.1 = f32[64,1024]{1,0} parameter(4)
  i.1 = s32[] parameter(5)
  constant.1 = s32[] constant(0)
  dus.1.0 = f32[1024,1024]{1,0} dynamic-update-slice(z.1.0, p4.1, i.1, constant.1)
  dn.1.0 = f32[1024,1024]{1,0} negate(dus.1.0)
  p6.1 = f32[4096]{0} parameter(6)
  bitcast.2 = f32[4096,1]{1,0} bitcast(p6.1)
  reduce-window.1 = f32[4093,1]{1,0} reduce-window(bitcast.2, constant.2.0), window={size=4x1},
    to_apply=region_1.2.clone
  rwn.0.0 = f32[4093,1]{1,0} negate(reduce-window.1)
  bitcast.1.0 = f32[4093]{0} bitcast(rwn.0.0)
  cvt.1.0 = bf16[1024,1024]{1,0} convert(z.1.0)
  cmp.1.0 = pred[1024,1024]{1,0} compare(p0.1, p1.1), direction=GT
  sel.1.0 = f32[1024,1024]{1,0} select(cmp.1.0, p0.1, p1.1)
  sel2.1.0 = f32[1024,1024]{1,0} abs(sel.1.0)
  rv.1.0 = f32[1024,1024]{1,0} reverse(p1.1), dimensions={0}
  rvn.1.0 = f32[1024,1024]{1,0} sine(rv.1.0)
  iota.1 = f32[1024,1024]{1,0} iota(), iota_dimension=1
  ia.1.0 = f32[1024,1024]{1,0} add(iota.1, p0.1)
  p7.1 = f32[8,1024,1024]{2,1,0} parameter(7)
  e7.1.0 = f32[8,1024,1024]{2,1,0} exponential(p7.1)
  r7.5.0 = f32[8,1024]{1,0} reduce(e7.1.0, constant.2.0), dimensions={1}, to_apply=region_1.2
  ROOT tuple.1.0 = (bf16[2048]{0}, f32[256,260]{1,0}, f32[1024,1024]{1,0}, f32[4093]{0}, bf16[1024,1024]{1,0},
    f32[1024,1024]{1,0}, f32[1024,1024]{1,0}, f32[1024,1024]{1,0}, f32[8,1024]{1,0})
    tuple(rb.5.0, ps.1.0, dn.1.0, bitcast.1.0, cvt.1.0, sel2.1.0, rvn.1.0, ia.1.0, r7.5.0)
}"""

M7 = """
region_0.1 { r4.2 = f32[] parameter(0) r4.3 = f32[] parameter(1) ROOT s.1.0 = f32[] add(r4.2, r4.3) }
region_0.1.clone { r4.0 = f32[] parameter(0) r4.1 = f32[] parameter(1) ROOT s.0.0 = f32[] add(r4.0, r4.1) }
ENTRY main.3 {
  p0.1 = f32[64,128,256]{2,1,0} parameter(0)
  negate.1 = f32[64,128,256]{2,1,0} negate(p0.1)
  transpose.1.0 = f32[128,64,256]{2,1,0} transpose(negate.1), dimensions={1,0,2}
  p1.1 = f32[1024,1024]{1,0} parameter(1)
  sl1.1.0 = f32[512,512]{1,0} slice(p1.1), slice={[0:1024:2], [0:1024:2]}
  e1.1.0 = f32[512,512]{1,0} exponential(sl1.1.0)
  p2.1 = f32[2048]{0} parameter(2)
  b2.1.0 = f32[2048,1024]{1,0} broadcast(p2.1), dimensions={0}
  p3.1 = f32[2048,1024]{1,0} parameter(3)
  a2.1.0 = f32[2048,1024]{1,0} add(b2.1.0, p3.1)
  p4.1 = f32[256,512]{1,0} parameter(4)
  constant.1.0 = f32[] constant(0)
  r4.5.0 = f32[512]{0} reduce(p4.1, constant.1.0), dimensions={0}, to_apply=region_0.1.clone
  p5.1 = bf16[512,2048]{1,0} parameter(5)
  multiply.1 = bf16[512,2048]{1,0} multiply(p5.1, p5.1)
  transpose.4.0 = bf16[2048,512]{1,0} transpose(multiply.1), dimensions={1,0}
  p6.1 = f32[1000,1000]{1,0} parameter(6)
  rw.5.0 = f32[333,1000]{1,0} reduce-window(p6.1, constant.1.0), window={size=3x1 stride=3x1},
    to_apply=region_0.1
  q6.1.0 = f32[333,1000]{1,0} sqrt(rw.5.0)
  ROOT tuple.1.0 = (f32[128,64,256]{2,1,0}, f32[512,512]{1,0}, f32[2048,1024]{1,0}, f32[512]{0},
    bf16[2048,512]{1,0}, f32[333,1000]{1,0})
    tuple(transpose.1.0, e1.1.0, a2.1.0, r4.5.0, transpose.4.0, q6.1.0)
}"""
