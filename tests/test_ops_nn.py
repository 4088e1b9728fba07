"""NN ops on hpu (conv, pooling, norms, embedding) run natively and equal torch's CPU."""
import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from conftest import hpu
from float64_judge import assert_no_further_from_float64, cpu_bf16_conv_rounds_intermediates

NN_OPS = {"aten::convolution_overrideable", "aten::convolution_backward_overrideable",
          "aten::max_pool2d_with_indices", "aten::max_pool2d_with_indices_backward",
          "aten::avg_pool2d", "aten::avg_pool2d_backward", "aten::_adaptive_avg_pool2d",
          "aten::_adaptive_avg_pool2d_backward", "aten::native_batch_norm",
          "aten::native_batch_norm_backward", "aten::native_layer_norm",
          "aten::native_layer_norm_backward", "aten::native_group_norm",
          "aten::native_group_norm_backward",
          "aten::index_select", "aten::embedding_dense_backward", "aten::mm", "aten::addmm",
          "aten::bmm", "aten::baddbmm"}


def no_fallback(counter):
    hit = {k: v for k, v in counter().items() if k in NN_OPS}
    assert not hit, f"fell back to CPU: {hit}"


def rnd(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed + 7 * sum(shape))
    return torch.randn(shape, generator=g).to(dtype)


def close(got, want, dtype=torch.float32, **kw):
    assert got.device.type == "hpu"
    assert got.shape == want.shape and got.dtype == want.dtype
    if dtype == torch.bfloat16:
        torch.testing.assert_close(got.cpu().float(), want.float(), atol=kw.get("atol", 3e-2), rtol=2e-2)
    else:
        torch.testing.assert_close(got.cpu(), want, **kw)


def fwd_bwd(fn, inputs, dtype, seed=1, **kw):
    """Run fn on cpu and hpu copies of inputs, then backward with the same gradient;
    compare outputs and all input grads. In bfloat16 on a CPU whose torch convolution rounds
    its intermediates (float64_judge), a result that differs from CPU's is judged against a
    float64 run instead: no further from it than CPU's."""
    cpu_in = [x.clone().requires_grad_(x.is_floating_point()) for x in inputs]
    hpu_in = [hpu(x).requires_grad_(x.is_floating_point()) for x in inputs]
    yc, yh = fn(*cpu_in), fn(*hpu_in)
    g = rnd(*yc.shape, dtype=yc.dtype, seed=seed)
    yc.backward(g)
    yh.backward(hpu(g))
    pairs = [(yh.detach(), yc.detach())] + [(a.grad, b.grad) for a, b in zip(hpu_in, cpu_in) if b.grad is not None]
    try:
        for got, want in pairs:
            close(got, want, dtype, **kw)
    except AssertionError:
        if dtype != torch.bfloat16 or not cpu_bf16_conv_rounds_intermediates():
            raise
        in64 = [x.double().requires_grad_(x.is_floating_point()) for x in inputs]
        y64 = fn(*in64)
        y64.backward(g.double())
        refs = [y64.detach()] + [x.grad for x in in64 if x.grad is not None]
        for (got, want), ref in zip(pairs, refs):
            assert_no_further_from_float64(got, want, ref, "fwd_bwd")


DT = [torch.float32, torch.bfloat16]


@pytest.mark.parametrize("dtype", DT)
@pytest.mark.parametrize("cfg", [
    dict(stride=1, padding=1, dilation=1, groups=1),
    dict(stride=2, padding=0, dilation=1, groups=1),
    dict(stride=(1, 2), padding=(2, 1), dilation=(2, 1), groups=1),
    dict(stride=1, padding=0, dilation=1, groups=2),
    dict(stride=1, padding=1, dilation=1, groups=4),
])
@pytest.mark.parametrize("bias", [True, False])
def test_conv2d(fallback_counter, dtype, cfg, bias):
    x = rnd(2, 4, 9, 8, dtype=dtype)
    w = rnd(6 if cfg["groups"] != 4 else 8, 4 // cfg["groups"], 3, 3, dtype=dtype, seed=2) * 0.3
    b = rnd(w.shape[0], dtype=dtype, seed=3)
    if bias:
        fwd_bwd(lambda x, w, b: F.conv2d(x, w, b, **cfg), [x, w, b], dtype)
    else:
        fwd_bwd(lambda x, w: F.conv2d(x, w, None, **cfg), [x, w], dtype)
    no_fallback(fallback_counter)


@pytest.mark.parametrize("dtype", DT)
@pytest.mark.parametrize("shape", [
    ((4, 16, 14, 14), (32, 16, 3, 3), dict(padding=1)),                   # the reference CNN's layer 2
    ((3, 1, 28, 28), (16, 1, 3, 3), dict(padding=1)),                     # its layer 1
    ((3, 24, 10, 9), (12, 12, 3, 3), dict(padding=2, dilation=2, groups=2)),
    ((2, 12, 6, 19), (5, 12, 2, 3), dict(padding=(0, 1))),                # rows wider than 16 lanes
])
def test_conv_stride1_gradients(fallback_counter, dtype, shape):
    """Stride-1 layers with 12+ channels a group: float32 (and widened bfloat16) gradients
    run without im2col (kernels/conv_f32grad.go), in another summation order than torch's:
    equal to float32 rounding of sums over hundreds of terms."""
    xs, ws, cfg = shape
    x, w = rnd(*xs, dtype=dtype), rnd(*ws, dtype=dtype, seed=2) * 0.3
    b = rnd(ws[0], dtype=dtype, seed=3)
    fwd_bwd(lambda x, w, b: F.conv2d(x, w, b, **cfg), [x, w, b], dtype, rtol=2e-5, atol=2e-4)
    no_fallback(fallback_counter)


@pytest.mark.parametrize("dtype", DT)
def test_conv_pointwise_and_noncontiguous(fallback_counter, dtype):
    x = rnd(3, 8, 6, 5, dtype=dtype).permute(0, 1, 3, 2)  # non-contiguous input
    w = rnd(5, 8, 1, 1, dtype=dtype, seed=4)
    fwd_bwd(lambda x, w: F.conv2d(x, w), [x, w], dtype)
    # channels_last memory format
    x2 = rnd(2, 3, 7, 7, dtype=dtype).contiguous(memory_format=torch.channels_last)
    w2 = rnd(4, 3, 3, 3, dtype=dtype, seed=5)
    fwd_bwd(lambda x, w: F.conv2d(x, w, padding=1), [x2, w2], dtype)
    no_fallback(fallback_counter)


@pytest.mark.parametrize("dtype", DT)
@pytest.mark.parametrize("cfg", [dict(stride=1, padding=0), dict(stride=2, padding=2, dilation=2, groups=2)])
def test_conv1d(fallback_counter, dtype, cfg):
    x = rnd(2, 4, 17, dtype=dtype)
    w = rnd(6, 4 // cfg.get("groups", 1), 3, dtype=dtype, seed=2)
    b = rnd(6, dtype=dtype, seed=3)
    fwd_bwd(lambda x, w, b: F.conv1d(x, w, b, **cfg), [x, w, b], dtype)
    no_fallback(fallback_counter)


def test_conv_float64_and_errors(fallback_counter):
    x, w = rnd(1, 2, 5, 5).double(), rnd(3, 2, 3, 3).double()
    fwd_bwd(lambda x, w: F.conv2d(x, w), [x, w], torch.float64)
    no_fallback(fallback_counter)
    with pytest.raises(RuntimeError):
        F.conv2d(hpu(rnd(1, 3, 5, 5)), hpu(rnd(2, 2, 3, 3)))


def test_shape_checks_survive_the_meta_memo():
    # The lowerings remember each shape question's answer; a bad call is never remembered,
    # so it raises CPU's error every time, also right after good calls of the same op.
    x, w = hpu(rnd(1, 2, 5, 5)), hpu(rnd(3, 2, 3, 3))
    for _ in range(2):
        assert F.conv2d(x, w, padding=1).shape == (1, 3, 5, 5)
        with pytest.raises(RuntimeError, match="expected input"):
            F.conv2d(hpu(rnd(1, 4, 5, 5)), w)
        with pytest.raises(RuntimeError) as e:
            F.max_pool2d(x, 7)
        with pytest.raises(RuntimeError) as c:
            F.max_pool2d(rnd(1, 2, 5, 5), 7)
        assert str(e.value) == str(c.value)


@pytest.mark.parametrize("dtype", DT)
@pytest.mark.parametrize("cfg", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                 dict(kernel_size=(3, 2), stride=(2, 1), dilation=(1, 2), ceil_mode=True)])
def test_max_pool2d(fallback_counter, dtype, cfg):
    x = rnd(2, 3, 9, 10, dtype=dtype)
    fwd_bwd(lambda x: F.max_pool2d(x, **cfg), [x], dtype)
    yc, ic = F.max_pool2d(x, return_indices=True, **cfg)
    yh, ih = F.max_pool2d(hpu(x), return_indices=True, **cfg)
    assert torch.equal(ih.cpu(), ic)
    fwd_bwd(lambda x: F.max_pool2d(x, **cfg), [x[0]], dtype)  # unbatched
    no_fallback(fallback_counter)


def test_max_pool2d_ties_and_nan(fallback_counter):
    x = torch.zeros(1, 1, 4, 4)
    x[0, 0, 1, 1] = float("nan")
    yc, ic = F.max_pool2d(x, 2, return_indices=True)
    yh, ih = F.max_pool2d(hpu(x), 2, return_indices=True)
    torch.testing.assert_close(yh.cpu(), yc, equal_nan=True)
    assert torch.equal(ih.cpu(), ic)
    no_fallback(fallback_counter)


@pytest.mark.parametrize("dtype", DT)
@pytest.mark.parametrize("cfg", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                 dict(kernel_size=3, stride=2, padding=1, count_include_pad=False, ceil_mode=True),
                                 dict(kernel_size=(2, 3), divisor_override=5)])
def test_avg_pool2d(fallback_counter, dtype, cfg):
    x = rnd(2, 3, 9, 10, dtype=dtype)
    fwd_bwd(lambda x: F.avg_pool2d(x, **cfg), [x], dtype)
    no_fallback(fallback_counter)


@pytest.mark.parametrize("dtype", DT)
@pytest.mark.parametrize("size", [(3, 4), (5, 7), (2, 1)])
def test_adaptive_avg_pool2d(fallback_counter, dtype, size):
    x = rnd(2, 3, 9, 10, dtype=dtype)
    fwd_bwd(lambda x: F.adaptive_avg_pool2d(x, size), [x], dtype)
    no_fallback(fallback_counter)


@pytest.mark.parametrize("dtype", DT)
@pytest.mark.parametrize("shape", [(4, 3), (4, 3, 5), (2, 5, 4, 3)])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_train_eval(fallback_counter, dtype, shape, affine):
    x = rnd(*shape, dtype=dtype) * 2 + 1
    C = shape[1]
    bn = {1: nn.BatchNorm1d, 2: nn.BatchNorm2d}[max(len(shape) - 2, 1)](C, affine=affine).to(dtype)
    if affine:
        with torch.no_grad():
            bn.weight.copy_(rnd(C, seed=3))
            bn.bias.copy_(rnd(C, seed=4))
    hbn = copy.deepcopy(bn).to("hpu")
    xc, xh = x.clone().requires_grad_(), hpu(x).requires_grad_()
    yc, yh = bn(xc), hbn(xh)
    close(yh, yc, dtype)
    g = rnd(*shape, dtype=dtype, seed=5)
    yc.backward(g)
    yh.backward(hpu(g))
    close(xh.grad, xc.grad, dtype)
    if affine:
        close(hbn.weight.grad, bn.weight.grad, dtype)
        close(hbn.bias.grad, bn.bias.grad, dtype)
    close(hbn.running_mean, bn.running_mean, dtype)
    close(hbn.running_var, bn.running_var, dtype)
    bn.eval()
    hbn.eval()
    fwd_bwd(lambda x: hbn(x) if x.device.type == "hpu" else bn(x), [x], dtype)
    no_fallback(fallback_counter)


@pytest.mark.parametrize("dtype", DT)
@pytest.mark.parametrize("shape,norm", [((4, 8), (8,)), ((2, 5, 16), (16,)), ((3, 4, 5), (4, 5))])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm(fallback_counter, dtype, shape, norm, affine):
    x = rnd(*shape, dtype=dtype) * 3 + 0.5
    w, b = rnd(*norm, dtype=dtype, seed=2), rnd(*norm, dtype=dtype, seed=3)
    if affine:
        fwd_bwd(lambda x, w, b: F.layer_norm(x, norm, w, b, 1e-5), [x, w, b], dtype)
    else:
        fwd_bwd(lambda x: F.layer_norm(x, norm, eps=1e-5), [x], dtype)
    no_fallback(fallback_counter)


@pytest.mark.parametrize("dtype,wdt", [(torch.float32, None), (torch.float64, None),
                                        (torch.bfloat16, None), (torch.bfloat16, torch.float32)])
def test_native_layer_norm_stats_and_rounding(fallback_counter, dtype, wdt):
    """Outputs and saved statistics (dtype as on CPU: float32 only for a reduced input with
    float32 parameters); bf16 outputs round exactly as CPU's float-opmath kernel."""
    x = rnd(3, 7, 37, dtype=dtype) * 2 - 1
    w, b = rnd(37, dtype=wdt or dtype, seed=2), rnd(37, dtype=wdt or dtype, seed=3)
    want = torch.native_layer_norm(x, [37], w, b, 1e-5)
    got = torch.native_layer_norm(hpu(x), [37], hpu(w), hpu(b), 1e-5)
    for g, c in zip(got, want):
        assert g.dtype == c.dtype and g.shape == c.shape
        if dtype == torch.bfloat16:
            torch.testing.assert_close(g.cpu().float(), c.float(), atol=0, rtol=8e-3)
        else:
            torch.testing.assert_close(g.cpu(), c)
    if dtype == torch.bfloat16:
        assert (got[0].cpu() != want[0]).sum() <= 2
    no_fallback(fallback_counter)


def test_layer_norm_backward_single_element_rows(fallback_counter):
    """normalized_shape [1]: CPU's dx formula cancels to a rounding residue; hpu follows it."""
    x, w, b = rnd(9, 1) * 3, rnd(1, seed=2), rnd(1, seed=3)
    fwd_bwd(lambda x, w, b: F.layer_norm(x, [1], w, b, 1e-5), [x, w, b], torch.float32)
    fwd_bwd(lambda x: F.layer_norm(x, [1], eps=1e-5), [x], torch.float32)
    no_fallback(fallback_counter)


@pytest.mark.parametrize("dtype", DT + [torch.float64])
@pytest.mark.parametrize("shape,groups", [((2, 6, 5, 4), 3), ((3, 32, 7), 2), ((4, 4), 4),
                                          ((2, 8, 3, 3), 1)])
@pytest.mark.parametrize("affine", [True, False])
def test_group_norm(fallback_counter, dtype, shape, groups, affine):
    x = rnd(*shape, dtype=dtype) * 3 + 0.5
    C = shape[1]
    w, b = rnd(C, dtype=dtype, seed=2), rnd(C, dtype=dtype, seed=3)
    if affine:
        fwd_bwd(lambda x, w, b: F.group_norm(x, groups, w, b, 1e-5), [x, w, b], dtype)
    else:
        fwd_bwd(lambda x: F.group_norm(x, groups, eps=1e-5), [x], dtype)
    N = shape[0]
    HxW = x[0, 0].numel()
    want = torch.native_group_norm(x, w if affine else None, b if affine else None, N, C, HxW,
                                   groups, 1e-5)
    got = torch.native_group_norm(hpu(x), hpu(w) if affine else None,
                                  hpu(b) if affine else None, N, C, HxW, groups, 1e-5)
    for g, c in zip(got, want):
        close(g, c, dtype)
    no_fallback(fallback_counter)


def test_group_norm_module_training_step(fallback_counter):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.GroupNorm(4, 8), nn.ReLU())
    mh = copy.deepcopy(m).to("hpu")
    x = rnd(2, 3, 6, 6)
    yc, yh = m(x), mh(hpu(x))
    close(yh, yc, atol=1e-5, rtol=1e-5)
    yc.square().mean().backward()
    yh.square().mean().backward()
    for pc, ph in zip(m.parameters(), mh.parameters()):
        close(ph.grad, pc.grad, atol=1e-5, rtol=1e-4)
    no_fallback(fallback_counter)


@pytest.mark.parametrize("dtype", DT)
@pytest.mark.parametrize("padding_idx,scale", [(None, False), (2, False), (None, True)])
def test_embedding(fallback_counter, dtype, padding_idx, scale):
    w = rnd(10, 6, dtype=dtype)
    idx = torch.tensor([[1, 2, 3, 2], [9, 0, 2, 1]])
    wc, wh = w.clone().requires_grad_(), hpu(w).requires_grad_()
    yc = F.embedding(idx, wc, padding_idx=padding_idx, scale_grad_by_freq=scale)
    yh = F.embedding(hpu(idx), wh, padding_idx=padding_idx, scale_grad_by_freq=scale)
    close(yh, yc, dtype)
    g = rnd(*yc.shape, dtype=dtype, seed=3)
    yc.backward(g)
    yh.backward(hpu(g))
    close(wh.grad, wc.grad, dtype)
    no_fallback(fallback_counter)


def test_index_select(fallback_counter):
    x = rnd(4, 5, 6)
    for dim in (0, 1, 2, -1):
        idx = torch.tensor([3, 0, 0, 2])
        close(torch.index_select(hpu(x), dim, hpu(idx)), torch.index_select(x, dim, idx))
        close(torch.index_select(hpu(x).transpose(0, 2), dim, hpu(idx.int())),
              torch.index_select(x.transpose(0, 2), dim, idx.int()))
    xi = torch.arange(20).reshape(4, 5)
    assert torch.equal(torch.index_select(hpu(xi), 1, hpu(torch.tensor([4, 1]))).cpu(), xi[:, [4, 1]])
    no_fallback(fallback_counter)
    with pytest.raises(IndexError):
        torch.index_select(hpu(x), 0, hpu(torch.tensor([7])))


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)  # a bias before BN has ~0 grad: Adam amplifies noise
        self.bn = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 8, 3, stride=2, groups=2)
        self.fc = nn.Linear(8 * 2 * 2, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn(self.c1(x))), 2)
        x = F.adaptive_avg_pool2d(F.relu(self.c2(x)), 2)
        return self.fc(x.flatten(1))


def _train_step_equal(model, x, target, opt_cls, steps=2, **opt_kw):
    torch.manual_seed(0)
    mc, mh = copy.deepcopy(model), copy.deepcopy(model).to("hpu")
    oc, oh = opt_cls(mc.parameters(), **opt_kw), opt_cls(mh.parameters(), **opt_kw)
    for _ in range(steps):
        for m, o, dev in ((mc, oc, "cpu"), (mh, oh, "hpu")):
            o.zero_grad()
            loss = F.cross_entropy(m(x.to(dev)), target.to(dev))
            loss.backward()
            o.step()
    for (n, pc), ph in zip(mc.named_parameters(), mh.parameters()):
        torch.testing.assert_close(ph.detach().cpu(), pc.detach(), atol=1e-5, rtol=1e-4, msg=n)
    for bc, bh in zip(mc.buffers(), mh.buffers()):
        torch.testing.assert_close(bh.cpu(), bc, atol=1e-5, rtol=1e-4)


def test_cnn_adam_step(fallback_counter):
    torch.manual_seed(1)
    _train_step_equal(SmallCNN(), rnd(4, 3, 10, 10), torch.tensor([1, 2, 3, 4]), torch.optim.Adam, lr=1e-2)
    no_fallback(fallback_counter)


def test_mlp_adamw_sgd_step(fallback_counter):
    torch.manual_seed(2)
    mlp = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.LayerNorm(32), nn.Linear(32, 5))
    x, t = rnd(16, 12), torch.arange(16) % 5
    _train_step_equal(mlp, x, t, torch.optim.AdamW, lr=1e-2)
    _train_step_equal(mlp, x, t, torch.optim.SGD, lr=1e-1, momentum=0.9)
    no_fallback(fallback_counter)


def test_transformer_layer_eval(fallback_counter):
    torch.manual_seed(3)
    emb = nn.Embedding(20, 16)
    layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, activation="gelu", batch_first=True)
    idx = torch.randint(0, 20, (2, 5))

    def run(dev):
        e, lay = copy.deepcopy(emb).to(dev), copy.deepcopy(layer).to(dev)
        y = lay(e(idx.to(dev)))
        y.pow(2).sum().backward()
        return y, e.weight.grad, lay.linear1.weight.grad
    for a, b in zip(run("hpu"), run("cpu")):
        torch.testing.assert_close(a.cpu(), b, atol=1e-5, rtol=1e-4)
    no_fallback(fallback_counter)


# ----------------------------------------------------------------------------- losses
# Forward and backward of the elementwise losses run natively (no CPU fallback at all) and
# equal torch's CPU: float32 to a few ulps, bfloat16 to its rounding.

_LOSS_TOL = {torch.float32: dict(rtol=1e-6, atol=1e-7), torch.bfloat16: dict(rtol=1.6e-2, atol=1e-5)}


def _loss_pair(fn, ins, dtype, ngrad=2):
    """fn on cpu and on hpu: (cpu out, hpu out, cpu grads, hpu grads); grads of ins[:ngrad]."""
    cs = [t.to(dtype).detach().requires_grad_(i < ngrad) if t is not None else None for i, t in enumerate(ins)]
    hs = [hpu(t.to(dtype)).detach().requires_grad_(i < ngrad) if t is not None else None
          for i, t in enumerate(ins)]
    yc, yh = fn(*cs), fn(*hs)
    gout = rnd(*yc.shape, seed=3).to(dtype)
    grads_c = torch.autograd.grad(yc, [t for t in cs if t is not None and t.requires_grad], gout)
    grads_h = torch.autograd.grad(yh, [t for t in hs if t is not None and t.requires_grad], hpu(gout))
    return yc, yh, grads_c, grads_h


def _check_loss(fallback_counter, fn, ins, dtype):
    yc, yh, gc, gh = _loss_pair(fn, ins, dtype)
    assert fallback_counter() == {}, f"fell back to CPU: {fallback_counter()}"
    torch.testing.assert_close(yh.cpu(), yc.detach(), **_LOSS_TOL[dtype])
    for a, b in zip(gh, gc):
        torch.testing.assert_close(a.cpu(), b, **_LOSS_TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_l1_smooth_l1_huber(fallback_counter, dtype, reduction):
    x, y = rnd(6, 7), rnd(6, 7, seed=1)
    x[0, :3] = y[0, :3]  # zero differences: sgn(0) = 0, the smooth_l1/huber branch points
    _check_loss(fallback_counter, lambda a, b: F.l1_loss(a, b, reduction=reduction), [x, y], dtype)
    for beta in (0.5, 1.0, 0.0):
        _check_loss(fallback_counter, lambda a, b: F.smooth_l1_loss(a, b, reduction=reduction, beta=beta),
                    [x, y], dtype)
    for delta in (0.3, 1.0, 2.5):
        _check_loss(fallback_counter, lambda a, b: F.huber_loss(a, b, reduction=reduction, delta=delta),
                    [x, y], dtype)


def test_huber_bf16_rounds_each_step(fallback_counter):
    # torch computes bfloat16 huber in bfloat16 vectors (every step rounds): bit-equal here
    x, y = rnd(64, 33, dtype=torch.bfloat16), rnd(64, 33, dtype=torch.bfloat16, seed=5)
    out = F.huber_loss(hpu(x), hpu(y), reduction="none", delta=0.7).cpu()
    assert torch.equal(out, F.huber_loss(x, y, reduction="none", delta=0.7))
    assert fallback_counter() == {}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_binary_cross_entropy(fallback_counter, dtype, reduction, weighted):
    g = torch.Generator().manual_seed(11)
    p, t = torch.rand(5, 8, generator=g), torch.rand(5, 8, generator=g)
    p[0, 0], p[0, 1], t[1, 0] = 0.0, 1.0, 1.0  # log(0) clamped at -100, eps in the backward
    w = torch.rand(8, generator=g) if weighted else None
    _check_loss(fallback_counter,
                lambda a, b, *ww: F.binary_cross_entropy(a, b, weight=ww[0] if ww else None, reduction=reduction),
                [p, t] + ([w] if weighted else []), dtype)


def test_binary_cross_entropy_range_error():
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        F.binary_cross_entropy(hpu(torch.tensor([0.5, 1.5])), hpu(torch.tensor([0.0, 1.0])))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weights", ["none", "weight", "pos_weight", "both"])
def test_binary_cross_entropy_with_logits(fallback_counter, dtype, reduction, weights):
    g = torch.Generator().manual_seed(12)
    x, t = torch.randn(6, 5, generator=g) * 4, torch.rand(6, 5, generator=g)
    w = torch.rand(5, generator=g) if weights in ("weight", "both") else None
    pw = torch.rand(5, generator=g) * 3 if weights in ("pos_weight", "both") else None

    def fn(a, b, *rest):
        it = iter(rest)
        ww = next(it) if w is not None else None
        pp = next(it) if pw is not None else None
        return F.binary_cross_entropy_with_logits(a, b, weight=ww, pos_weight=pp, reduction=reduction)
    _check_loss(fallback_counter, fn, [x, t] + [v for v in (w, pw) if v is not None], dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_logit_and_logsigmoid(fallback_counter, dtype):
    p = torch.rand(7, 9, generator=torch.Generator().manual_seed(4))
    for eps in (None, 0.2):
        _check_loss(fallback_counter, lambda a: torch.logit(a, eps), [p], dtype)
    _check_loss(fallback_counter, F.logsigmoid, [rnd(7, 9) * 5], dtype)


def test_sgn(fallback_counter):
    x = torch.tensor([-2.0, 0.0, 3.0, -0.0, float("nan")])  # CPU: sgn(nan) = 0
    torch.testing.assert_close(torch.sgn(hpu(x)).cpu(), torch.sgn(x), equal_nan=True)
    i = torch.tensor([-5, 0, 7])
    assert torch.equal(torch.sgn(hpu(i)).cpu(), torch.sgn(i))
    assert fallback_counter() == {}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_batch_norm_entry_points(fallback_counter, dtype):
    """_batch_norm_with_update / _native_batch_norm_legit / batch_norm_backward run natively."""
    x, w, b = rnd(4, 3, 5, dtype=dtype), rnd(3, dtype=dtype, seed=1), rnd(3, dtype=dtype, seed=2)
    rm, rv = rnd(3, dtype=dtype, seed=3), rnd(3, seed=4).abs().to(dtype) + 0.5
    args = lambda dev: [t.to(dev) for t in (x, w, b, rm.clone(), rv.clone())]
    c, h = args("cpu"), args("hpu")
    rc = torch.ops.aten._batch_norm_with_update(*c, 0.3, 1e-5)
    rh = torch.ops.aten._batch_norm_with_update(*h, 0.3, 1e-5)
    for a, e in zip(rh[:3], rc[:3]):
        torch.testing.assert_close(a.cpu(), e)
    torch.testing.assert_close(h[3].cpu(), c[3])  # running stats updated in place
    torch.testing.assert_close(h[4].cpu(), c[4])
    assert rh[3].numel() == 0
    g = rnd(4, 3, 5, dtype=dtype, seed=5)
    gc = torch.ops.aten.batch_norm_backward(g, x, w, c[3], c[4], rc[1], rc[2], True, 1e-5, [True] * 3, rc[3])
    gh = torch.ops.aten.batch_norm_backward(hpu(g), h[0], h[1], h[3], h[4], rh[1], rh[2], True, 1e-5,
                                            [True] * 3, rh[3])
    for a, e in zip(gh, gc):
        torch.testing.assert_close(a.cpu(), e)
    lc = torch.ops.aten._native_batch_norm_legit(x, w, b, rm.clone(), rv.clone(), True, 0.1, 1e-5)
    lh = torch.ops.aten._native_batch_norm_legit(hpu(x), hpu(w), hpu(b), hpu(rm), hpu(rv), True, 0.1, 1e-5)
    for a, e in zip(lh, lc):
        torch.testing.assert_close(a.cpu(), e)
    assert fallback_counter() == {}
