"""optimum-habana's remaining fp8 ops: torch.ops.hpu.softmax_fp8 (Falcon's and diffusers'
attention Softmax) and torch.ops.hpu.cast_to_fp8_just_in_time (finegrained-fp8 Linear, feeding
fp8_gemm_v2 with blockwise inverse scales), against reference math written here, with their
checks and fake kernels; then optimum-habana's own GaudiFP8Linear through both of its paths."""
import pytest
import torch

import habana_frameworks.torch  # noqa: F401
from habana_frameworks.torch.hpex.kernels import Fp8Ops

FP8_MAX = 240.0  # float8_e4m3fn's range on the default device, Gaudi2


def _scores(shape=(5, 4, 4, 6), seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(shape, generator=g) * 4.0).bfloat16()


def _softmax_ref(x, dim, in_scale=None, out_scale=None, inv=None, add=None):
    """The bridge's own test's reference: scale, (add), softmax, bfloat16, (out scale, fp8)."""
    y = x.float()
    if inv is not None:
        y = y * inv
    if in_scale is not None:
        y = y * in_scale
        if add is not None:
            y = y + add.float()
    r = torch.softmax(y, dim).bfloat16()
    if out_scale is None:
        return r
    return (r.float() * out_scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)


@pytest.mark.parametrize("dim", [-1, -2, 1])
@pytest.mark.parametrize("inv", [None, 0.1])
def test_softmax_fp8_bf16_out_matches_reference(dim, inv):
    x = _scores()
    inv_t = None if inv is None else torch.tensor(inv).to("hpu")
    y = torch.ops.hpu.softmax_fp8(x.to("hpu"), dim, None, None, inv_t)
    assert y.dtype == torch.bfloat16 and y.device.type == "hpu" and y.shape == x.shape
    torch.testing.assert_close(y.cpu(), _softmax_ref(x, dim, inv=inv), atol=0, rtol=0)


@pytest.mark.parametrize("input_dtype", [torch.bfloat16, torch.float8_e4m3fn])
@pytest.mark.parametrize("add_shape", [None, (5, 4, 4, 6), (5, 1, 1, 6)])
def test_softmax_fp8_scaled_fp8_out_matches_reference(input_dtype, add_shape):
    x = _scores().to(input_dtype)
    add = None if add_shape is None else _scores(add_shape, seed=1)
    s_in, s_out, inv = torch.tensor(0.05), torch.tensor(2.5), torch.tensor(0.1)
    y = torch.ops.hpu.softmax_fp8(x.to("hpu"), -1, s_in.to("hpu"), s_out.to("hpu"), inv.to("hpu"),
                                  None if add is None else add.to("hpu"))
    assert y.dtype == torch.float8_e4m3fn
    ref = _softmax_ref(x, -1, 0.05, 2.5, 0.1, add)
    torch.testing.assert_close(y.cpu().float(), ref.float(), atol=0, rtol=0)
    # and close to the exact softmax, within fp8's step (the bridge test's own tolerance)
    exact = torch.softmax(x.float() * 0.1 * 0.05 + (0 if add is None else add.float()), -1) * 2.5
    torch.testing.assert_close(y.cpu().float(), exact, atol=1e-2, rtol=0.1251)


def test_softmax_fp8_scalar_overloads():
    x = _scores()
    a = torch.ops.hpu.softmax_fp8(x.to("hpu"), -1, 0.05, 2.5, 0.1)  # .Scalar
    b = torch.ops.hpu.softmax_fp8(x.to("hpu"), -1, 0.05, 2.5, torch.tensor(0.1).to("hpu"))  # .Scalar_scales
    c = torch.ops.hpu.softmax_fp8(x.to("hpu"), -1, 0.05, 2.5)
    ref = _softmax_ref(x, -1, 0.05, 2.5, 0.1)
    for r in (a, b):
        assert r.dtype == torch.float8_e4m3fn
        torch.testing.assert_close(r.cpu().float(), ref.float(), atol=0, rtol=0)
    torch.testing.assert_close(c.cpu().float(), _softmax_ref(x, -1, 0.05, 2.5).float(), atol=0, rtol=0)


@pytest.mark.parametrize("call, message", [
    (lambda x: torch.ops.hpu.softmax_fp8(x.float(), -1), "Input tensor must be of torch.bfloat16 or torch.float8_e4m3fn dtype."),
    (lambda x: torch.ops.hpu.softmax_fp8(x, -1, torch.tensor(1.0, device="hpu")), "Output and input scales must be both given or None"),
    (lambda x: torch.ops.hpu.softmax_fp8(x.to(torch.float8_e4m3fn), -1), "If Input is of torch.float8_e4m3fn dtype then input scale must be given."),
    (lambda x: torch.ops.hpu.softmax_fp8(x, -1, None, None, None, x), "FusedAdd available only for Float8 output, but input scale is not given."),
    (lambda x: torch.ops.hpu.softmax_fp8(x, -1, 1.0, 1.0, None, x[0]), "FusedAdd tensor must have the same rank as the input tensor"),
    (lambda x: torch.ops.hpu.softmax_fp8(x, -1, 1.0, 1.0, None, x[:, :, :, :2]), "FusedAdd tensor must have the same first and last dim as the input tensor"),
    (lambda x: torch.ops.hpu.softmax_fp8(x, -1, 1.0, 1.0, None, x[:, :2]), "FusedAdd tensor's dim other than first and last should be equal to 1"),
    (lambda x: torch.ops.hpu.softmax_fp8(x, -1, torch.tensor(1.0, device="hpu").bfloat16(), torch.tensor(1.0, device="hpu")), "Input scale must be of dtype: Float"),
])
def test_softmax_fp8_checks_as_the_bridge(call, message):
    with pytest.raises(RuntimeError, match=message.replace("(", r"\(").replace(".", r"\.")):
        call(_scores().to("hpu"))
    with pytest.raises(IndexError):
        torch.ops.hpu.softmax_fp8(_scores().to("hpu"), 4)


def _jit_ref(x, bh, bw, out_dtype, scale_dtype, limit):
    """Per block, written out: scale = amax/limit in scale_dtype, q = x / scale saturated."""
    *lead, h, w = x.shape
    xf = x.float()
    q = torch.empty(x.shape, dtype=out_dtype)
    scale = torch.empty((*lead, h // bh, w // bw), dtype=scale_dtype)
    for idx in torch.cartesian_prod(*[torch.arange(n) for n in (*lead, h // bh, w // bw)]).reshape(-1, len(lead) + 2):
        *li, i, j = idx.tolist()
        blk = xf[(*li, slice(i * bh, (i + 1) * bh), slice(j * bw, (j + 1) * bw))]
        s = (blk.abs().max() / limit).to(scale_dtype)
        scale[(*li, i, j)] = s
        d = s.float() if s != 0 else torch.tensor(1.0)
        q[(*li, slice(i * bh, (i + 1) * bh), slice(j * bw, (j + 1) * bw))] = (blk / d).clamp(-limit, limit).to(out_dtype)
    return q, scale


@pytest.mark.parametrize("shape, block", [((6, 32), [1, 8]), ((2, 8, 16), [4, 4]), ((8, 12), [4, 1]), ((4, 16), [1, 16])])
@pytest.mark.parametrize("dtype, scale_dtype", [(torch.bfloat16, torch.bfloat16), (torch.float32, torch.float32),
                                                (torch.bfloat16, None)])
def test_cast_to_fp8_just_in_time_matches_blockwise_reference(shape, block, dtype, scale_dtype):
    g = torch.Generator().manual_seed(2)
    x = (torch.randn(shape, generator=g) * torch.logspace(-2, 2, shape[-1])).to(dtype)
    x[..., :block[0], :block[1]] = 0  # an all-zero block: scale 0, zeros
    q, s = torch.ops.hpu.cast_to_fp8_just_in_time(x.to("hpu"), block, out_dtype=torch.float8_e4m3fn,
                                                  scale_dtype=scale_dtype)
    want_scale = dtype if scale_dtype is None else scale_dtype
    rq, rs = _jit_ref(x, block[0], block[1], torch.float8_e4m3fn, want_scale, FP8_MAX)
    assert q.dtype == torch.float8_e4m3fn and s.dtype == want_scale and q.device.type == "hpu"
    assert torch.equal(q.cpu().view(torch.uint8), rq.view(torch.uint8))
    assert torch.equal(s.cpu(), rs)
    assert s.cpu().flatten()[0] == 0
    # fp8 * scale reconstructs the input within the format's relative step
    back = (q.cpu().float().reshape(*shape[:-2], shape[-2] // block[0], block[0], shape[-1] // block[1], block[1])
            * s.cpu().float().unsqueeze(-1).unsqueeze(-3)).reshape(shape)
    torch.testing.assert_close(back, x.float(), rtol=2 ** -3, atol=float(s.float().max()) * 2 ** -6)


def test_cast_to_fp8_just_in_time_e5m2_and_defaults():
    x = torch.randn(4, 8).bfloat16()
    q, s = torch.ops.hpu.cast_to_fp8_just_in_time(x.to("hpu"), [1, 4])
    assert q.dtype == torch.float8_e4m3fn and s.dtype == torch.bfloat16 and s.shape == (4, 2)
    q5, s5 = torch.ops.hpu.cast_to_fp8_just_in_time(x.to("hpu"), [1, 4], torch.float8_e5m2, torch.float32)
    rq, rs = _jit_ref(x, 1, 4, torch.float8_e5m2, torch.float32, 57344.0)
    assert torch.equal(q5.cpu().view(torch.uint8), rq.view(torch.uint8)) and torch.equal(s5.cpu(), rs)


@pytest.mark.parametrize("x, block, message", [
    (torch.randn(8), [1, 4], "input tensor must have at least 2 dimensions, got 1"),
    (torch.randn(8, 8), [2, 4], "block_height and block_width must be equal or one of them must be 1, got 2 and 4"),
    (torch.randn(8, 10), [1, 4], r"two last dimensions of input tensor must be divisible by block_height and block_width, got \[8, 10\] and \[1, 4\]"),
])
def test_cast_to_fp8_just_in_time_checks_as_the_bridge(x, block, message):
    with pytest.raises(RuntimeError, match="convert_to_fp8_just_in_time: " + message):
        torch.ops.hpu.cast_to_fp8_just_in_time(x.to("hpu"), block)


def test_fp8_gemm_v2_takes_blockwise_inverse_scales():
    g = torch.Generator().manual_seed(3)
    a, w = torch.randn(6, 32, generator=g), torch.randn(16, 32, generator=g)
    qa, sa = torch.ops.hpu.cast_to_fp8_just_in_time(a.to("hpu"), [1, 8], scale_dtype=torch.float32)
    qw, sw = torch.ops.hpu.cast_to_fp8_just_in_time(w.to("hpu"), [8, 8], scale_dtype=torch.float32)
    out = torch.ops.hpu.fp8_gemm_v2(A=qa, trans_A=False, B=qw, trans_B=True, D=None, out_dtype=torch.float32,
                                    A_scale_inv=sa, B_scale_inv=sw.t(), bias=None, accumulate=False)
    deq_a = qa.cpu().float() * sa.cpu().repeat_interleave(8, 1)
    deq_w = qw.cpu().float() * sw.cpu().repeat_interleave(8, 0).repeat_interleave(8, 1)
    torch.testing.assert_close(out.cpu(), deq_a @ deq_w.t(), rtol=1e-5, atol=1e-5)
    # within fp8's rounding (2^-4 relative per operand) of the exact product, term by term
    assert ((out.cpu() - a @ w.t()).abs() <= 0.13 * (a.abs() @ w.abs().t())).all()
    with pytest.raises(RuntimeError, match="does not divide"):
        torch.ops.hpu.fp8_gemm_v2(qa, False, qw, True, None, torch.float32, sa[:, :3], None)


def test_fake_kernels_give_shapes_and_dtypes():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        x = torch.empty(2, 3, 8, 16, dtype=torch.bfloat16, device="hpu")
        assert torch.ops.hpu.softmax_fp8(x, -1).dtype == torch.bfloat16
        assert torch.ops.hpu.softmax_fp8(x, -1, 0.5, 2.0, 0.1).dtype == torch.float8_e4m3fn
        q, s = torch.ops.hpu.cast_to_fp8_just_in_time(x, [4, 4], scale_dtype=torch.float32)
        assert q.shape == x.shape and q.dtype == torch.float8_e4m3fn and s.shape == (2, 3, 2, 4)
        assert s.dtype == torch.float32


def test_softmax_fp8_compiles_with_hpu_backend():
    inv = torch.tensor(0.25).to("hpu")

    def attn(s):
        return torch.ops.hpu.softmax_fp8(s, -1, None, None, inv)

    x = _scores().to("hpu")
    got = torch.compile(attn, backend="hpu_backend")(x)
    torch.testing.assert_close(got.cpu(), _softmax_ref(_scores(), -1, inv=0.25), atol=0, rtol=0)


def test_optimum_gaudi_fp8_linear_blockwise_equals_its_dequant_path():
    pytest.importorskip("optimum")
    from packaging.version import InvalidVersion
    try:
        from optimum.habana.transformers.integrations import finegrained_fp8 as fp8
    except ImportError:
        pytest.skip("optimum-habana is not installed")
    except InvalidVersion:  # as tests/test_clients_optimum.py: an editable install's pip list line
        pytest.skip("habana-torch-plugin is an editable install: optimum-habana cannot parse its version")
    torch.manual_seed(0)
    lin = fp8.GaudiFP8Linear(64, 32, bias=False, block_size=[16, 16], device="hpu")
    assert lin.fp8_linear_func == lin.fp8_linear_blockwise  # the op exists, so optimum takes the fast path
    w = torch.randn(32, 64)
    qw, sw = torch.ops.hpu.cast_to_fp8_just_in_time(w.to("hpu"), [16, 16], scale_dtype=torch.float32)
    lin.weight.copy_(qw)
    lin.weight_scale_inv.copy_(sw)
    lin.orig_M, lin.orig_N = 32, 64
    x = torch.randn(3, 5, 64).bfloat16().to("hpu")
    fast = lin.fp8_linear_blockwise(x.reshape(15, 64)).reshape(3, 5, 32)
    slow = lin.fp8_linear_dequant(x)
    assert fast.dtype == torch.bfloat16
    # The two differ by the activation's fp8 rounding (2^-4 relative per term; the weight
    # dequantizes the same in both) and their bfloat16 results' rounding.
    xc, wd = x.cpu().float(), lin.get_dequant_weight().cpu().float()
    diff = (fast.cpu().float() - slow.cpu().float()).abs()
    assert (diff <= 0.0625 * (xc.abs() @ wd.abs().t()) + 2 ** -7 * slow.cpu().float().abs() + 1e-6).all()
    exact = xc @ w.t()
    assert ((fast.cpu().float() - exact).abs() <= 0.13 * (xc.abs() @ w.abs().t()) + 2 ** -7 * exact.abs()).all()
