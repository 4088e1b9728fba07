"""EmbeddingBag on hpu: F.embedding_bag (aten::_embedding_bag, its backward and the
per-sample-weights backward) natively against torch on CPU; the bridge's DLRM helpers
(hpex EmbeddingBag / EmbeddingBagPreproc, _hpex_C, torch.ops.hpu.embedding_bag_sum*)
against references written from their documented semantics; F.ctc_loss on hpu served by
the native CTC kernel. Also run in the lazy pass (PT_HPU_LAZY_MODE=1)."""
import pytest
import torch
import torch.nn.functional as F

DTYPES = [torch.float32, torch.bfloat16]


def tol(dtype):
    return dict(atol=1e-5, rtol=1.3e-6) if dtype == torch.float32 else dict(atol=2e-2, rtol=1.6e-2)


def _bag_case(seed, V=13, D=6, n=17, idx_dtype=torch.int64):
    g = torch.Generator().manual_seed(seed)
    indices = torch.randint(0, V, (n,), generator=g).to(idx_dtype)
    offsets = torch.tensor([0, 3, 3, 8, 12], dtype=idx_dtype)  # bag 1 is empty
    return indices, offsets


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("variant", ["plain", "padding", "last_offset", "psw", "int32", "scale_freq"])
def test_embedding_bag_matches_cpu(dtype, mode, variant, fallback_counter):
    if variant == "psw" and mode != "sum":
        pytest.skip("per_sample_weights is sum-only")
    if variant == "scale_freq" and mode == "max":
        pytest.skip("scale_grad_by_freq has no effect in max mode")
    torch.manual_seed(0)
    V, D = 13, 6
    indices, offsets = _bag_case(1, V, D, idx_dtype=torch.int32 if variant == "int32" else torch.int64)
    weight = torch.randn(V, D).to(dtype)
    kw = dict(mode=mode)
    if variant == "padding":
        kw["padding_idx"] = int(indices[4])  # a padded position inside a bag
    if variant == "last_offset":
        offsets = torch.cat([offsets, torch.tensor([indices.numel()], dtype=offsets.dtype)])
        kw["include_last_offset"] = True
    if variant == "scale_freq":
        kw["scale_grad_by_freq"] = True
    psw = torch.rand(indices.numel()).to(dtype) if variant == "psw" else None

    wc = weight.clone().requires_grad_()
    pc = psw.clone().requires_grad_() if psw is not None else None
    ref = F.embedding_bag(indices, wc, offsets, per_sample_weights=pc, **kw)
    gy = torch.randn(ref.shape).to(dtype)
    ref.backward(gy)

    wh = weight.to("hpu").requires_grad_()
    ph = psw.to("hpu").requires_grad_() if psw is not None else None
    out = F.embedding_bag(indices.to("hpu"), wh, offsets.to("hpu"), per_sample_weights=ph, **kw)
    out.backward(gy.to("hpu"))
    assert out.dtype == dtype
    torch.testing.assert_close(out.detach().cpu(), ref.detach(), **tol(dtype))
    torch.testing.assert_close(wh.grad.cpu(), wc.grad, **tol(dtype))
    if psw is not None:
        torch.testing.assert_close(ph.grad.cpu(), pc.grad, **tol(dtype))
    assert fallback_counter() == {}


@pytest.mark.parametrize("mode", [0, 1, 2])
def test_embedding_bag_aux_outputs_like_cpu(mode):
    """offset2bag / bag_size / max_indices in torch's CPU layouts, so either side's
    forward feeds the other side's backward."""
    indices, offsets = _bag_case(2)
    weight = torch.randn(13, 6)
    for pad in (-1, int(indices[0])):
        ref = torch._embedding_bag(weight, indices, offsets, False, mode, False, None, False, pad)
        got = torch._embedding_bag(weight.to("hpu"), indices.to("hpu"), offsets.to("hpu"), False, mode, False,
                                   None, False, pad)
        for r, g in zip(ref, got):
            torch.testing.assert_close(g.cpu(), r)


def test_embedding_bag_2d_input_max_ties_and_forward_only(fallback_counter):
    weight = torch.tensor([[1.0, 5.0], [1.0, 2.0], [3.0, 5.0]])
    inp = torch.tensor([[0, 1], [1, 0], [2, 2]])
    with torch.no_grad():
        out = F.embedding_bag(inp.to("hpu"), weight.to("hpu"), mode="max")
    torch.testing.assert_close(out.cpu(), F.embedding_bag(inp, weight, mode="max"))
    wc, wh = weight.clone().requires_grad_(), weight.to("hpu").requires_grad_()
    F.embedding_bag(inp, wc, mode="max").sum().backward()
    F.embedding_bag(inp.to("hpu"), wh, mode="max").sum().backward()
    torch.testing.assert_close(wh.grad.cpu(), wc.grad)  # ties go to the first position, as on CPU
    assert fallback_counter() == {}


def test_embedding_bag_module_training_step(fallback_counter):
    torch.manual_seed(3)
    cpu = torch.nn.EmbeddingBag(20, 8, mode="mean")
    dev = torch.nn.EmbeddingBag(20, 8, mode="mean").to("hpu")
    dev.load_state_dict(cpu.state_dict())
    inp = torch.randint(0, 20, (5, 4))
    for m, x in ((cpu, inp), (dev, inp.to("hpu"))):
        opt = torch.optim.SGD(m.parameters(), lr=0.5)
        m(x).pow(2).sum().backward()
        opt.step()
    torch.testing.assert_close(dev.weight.detach().cpu(), cpu.weight.detach(), atol=1e-6, rtol=1e-5)
    assert fallback_counter() == {}


def _fresh(t):
    """t on hpu, materialised (in lazy mode a failing graph poisons what it produced)."""
    import habana_frameworks.torch.core as htcore
    h = t.to("hpu")
    htcore.mark_step()
    return h


@pytest.mark.parametrize("case", ["index", "first_offset", "last_offset", "psw_mode"])
def test_embedding_bag_bad_input_raises_like_cpu(case):
    w = _fresh(torch.randn(6, 3))
    if case == "index":
        with pytest.raises(RuntimeError, match="Expected idx >= 0 && idx < num_embeddings but found idx to be 7"):
            F.embedding_bag(_fresh(torch.tensor([1, 7])), w, _fresh(torch.tensor([0, 1]))).cpu()
    elif case == "first_offset":
        with pytest.raises(RuntimeError, match=r"offsets\[0\] has to be 0"):
            F.embedding_bag(_fresh(torch.tensor([1, 2])), w, _fresh(torch.tensor([1, 1]))).cpu()
    elif case == "last_offset":
        with pytest.raises(RuntimeError, match=r"offsets\[-1\] can not be greater than input's length 2"):
            F.embedding_bag(_fresh(torch.tensor([1, 2])), w, _fresh(torch.tensor([0, 3]))).cpu()
    else:
        with pytest.raises(NotImplementedError, match="per_sample_weights is only supported for mode='sum'"):
            F.embedding_bag(_fresh(torch.tensor([1, 2])), w, _fresh(torch.tensor([0, 1])), mode="max",
                            per_sample_weights=_fresh(torch.ones(2)))


def test_embedding_bag_sparse_gradient_is_refused_clearly():
    """sparse=True would build a sparse COO gradient; hpu has no sparse tensors."""
    wh = torch.randn(10, 4).to("hpu").requires_grad_()
    out = F.embedding_bag(torch.tensor([1, 2, 2, 7]).to("hpu"), wh, torch.tensor([0, 2]).to("hpu"), sparse=True)
    with pytest.raises(NotImplementedError, match="sparse tensors are not supported on hpu; use sparse=False"):
        out.sum().backward()


# ------------------------------------------------- the bridge's DLRM helpers (_hpex_C)

def preproc_ref(indices, offsets):
    """From the documented semantics: distinct indices ascending, then for each the bags
    (output rows) of its positions in position order, with CSR offsets."""
    idx, off = indices.tolist(), offsets.tolist()
    bag_of = {}
    for b in range(len(off) - 1):
        for j in range(off[b], off[b + 1]):
            bag_of[j] = b
    uniq = sorted(set(idx))
    rows, offs = [], [0]
    for u in uniq:
        rows += [bag_of[j] for j in range(len(idx)) if idx[j] == u]
        offs.append(len(rows))
    return len(uniq), uniq, rows, offs


def bag_sum_ref(table, indices, offsets, nbags):
    out = torch.zeros(len(offsets) - 1, table.shape[1], dtype=torch.float64)
    for b in range(nbags):
        for j in range(int(offsets[b]), int(offsets[b + 1])):
            out[b] += table[int(indices[j])].double()
    return out


def test_embedding_bag_preproc_matches_reference():
    from habana_frameworks.torch.hpex.kernels import EmbeddingBagPreproc
    indices = torch.tensor([5, 2, 5, 9, 2, 2, 0, 5], dtype=torch.int32)
    offsets = torch.tensor([0, 3, 3, 6, 8], dtype=torch.int32)
    count, uniq, rows, row_offs = EmbeddingBagPreproc.forward(indices, offsets, 4)
    c, u, r, o = preproc_ref(indices, offsets)
    assert count.dtype == torch.int32 and int(count) == c
    assert uniq.dtype == rows.dtype == row_offs.dtype == torch.int32
    assert uniq.shape == (8,) and rows.shape == (8,) and row_offs.shape == (9,)
    assert uniq[:c].tolist() == u and rows.tolist() == r and row_offs[:c + 1].tolist() == o


@pytest.mark.parametrize("dtype", DTYPES)
def test_embedding_bag_sum_fwd_bwd_dlrm_flow(dtype, fallback_counter):
    """The DLRM flow: forward bag sums, preproc on the host, coalesced backward; the
    coalesced rows equal the dense gradient of F.embedding_bag's sum."""
    from habana_frameworks.torch.hpex.kernels import EmbeddingBag, EmbeddingBagPreproc
    torch.manual_seed(0)
    V, D = 11, 5
    table = torch.randn(V, D).to(dtype)
    idx = torch.randint(0, V, (14,), dtype=torch.int32)
    off = torch.tensor([0, 4, 4, 9, 14], dtype=torch.int32)
    for mode, vc in ((0, [idx.numel()]), (1, [off.numel(), idx.numel()]), (2, [off.numel()])):
        out = EmbeddingBag.forward(table.to("hpu"), idx.to("hpu"), off.to("hpu"),
                                   torch.tensor(vc, dtype=torch.int32).to("hpu"), mode)
        torch.testing.assert_close(out.cpu().double(), bag_sum_ref(table, idx, off, 4), **tol(dtype))
    # valid counts: only the first 2 bags (3 valid offsets) are computed
    out = EmbeddingBag.forward(table.to("hpu"), idx.to("hpu"), off.to("hpu"),
                               torch.tensor([3, 3], dtype=torch.int32).to("hpu"), 1)
    torch.testing.assert_close(out.cpu().double(), bag_sum_ref(table, idx, off, 2), **tol(dtype))
    assert out[2:].abs().sum().item() == 0

    count, uniq, rows, row_offs = EmbeddingBagPreproc.forward(idx, off, 4)
    n = int(count)
    grad_out = torch.randn(4, D).to(dtype)
    weight_grad = torch.full((V, D), 7.0, dtype=dtype).to("hpu")
    vc_bwd = torch.tensor([n + 1, rows.numel()], dtype=torch.int32)
    res = EmbeddingBag.backward(weight_grad, grad_out.to("hpu"), rows.to("hpu"), row_offs[:n + 1].to("hpu"),
                                vc_bwd.to("hpu"), 1)
    assert res.data_ptr() == weight_grad.data_ptr()
    w = table.float().requires_grad_()
    F.embedding_bag(idx.long(), w, off[:-1].long(), mode="sum").backward(grad_out.float())
    dense = w.grad
    got = weight_grad.cpu().float()
    torch.testing.assert_close(got[:n], dense[uniq[:n].long()], **tol(dtype))
    assert got[n:].abs().sum().item() == 0  # rows past the unique count are zeroed
    assert fallback_counter() == {}


def test_embedding_bag_hpu_ops_and_fakes():
    from torch._subclasses.fake_tensor import FakeTensorMode
    table = torch.randn(6, 3)
    idx = torch.tensor([0, 5, 5, 1], dtype=torch.int32)
    off = torch.tensor([0, 1, 4], dtype=torch.int32)
    vc = torch.tensor([4], dtype=torch.int32)
    out = torch.ops.hpu.embedding_bag_sum(table.to("hpu"), idx.to("hpu"), off.to("hpu"), vc.to("hpu"), 0)
    torch.testing.assert_close(out.cpu().double(), bag_sum_ref(table, idx, off, 2))
    buf = torch.empty(3, 3).to("hpu")
    r = torch.ops.hpu.embedding_bag_sum_bwd_out(buf, out, torch.tensor([0, 1, 1], dtype=torch.int32).to("hpu"),
                                                torch.tensor([0, 1, 3], dtype=torch.int32).to("hpu"),
                                                torch.tensor([3, 3], dtype=torch.int32).to("hpu"), 1)
    torch.testing.assert_close(r.cpu()[:2], torch.stack([out.cpu()[0], 2 * out.cpu()[1]]))
    assert r.cpu()[2].abs().sum() == 0
    with FakeTensorMode():
        ft = torch.empty(6, 3)
        fo = torch.empty(3, dtype=torch.int32)
        assert torch.ops.hpu.embedding_bag_sum(ft, torch.empty(4, dtype=torch.int32), fo, fo, 0).shape == (2, 3)
    with pytest.raises(RuntimeError, match="offsets must start at 0"):
        from habana_frameworks.torch._hpex_C import embedding_bag_preproc
        embedding_bag_preproc(idx, torch.tensor([1, 4], dtype=torch.int32), 6)


# --------------------------------------------------------------- F.ctc_loss on hpu

@pytest.mark.parametrize("lengths", ["list", "tensor"])
@pytest.mark.parametrize("concat", [False, True])
@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_f_ctc_loss_is_native_and_matches_cpu(lengths, concat, reduction, fallback_counter):
    torch.manual_seed(0)
    T, N, C, S = 20, 3, 6, 7
    lp = torch.randn(T, N, C).log_softmax(-1)
    targets = torch.randint(1, C, (N, S))
    il, tl = [20, 15, 11], [7, 0, 4]
    if concat:
        targets = torch.cat([targets[n, :tl[n]] for n in range(N)])
    if lengths == "tensor":
        il, tl = torch.tensor(il), torch.tensor(tl)
    ref_lp = lp.clone().requires_grad_()
    ref = F.ctc_loss(ref_lp, targets, il, tl, reduction=reduction)
    g = torch.rand(ref.shape) + 0.5
    ref.backward(g)
    h = lp.to("hpu").requires_grad_()
    hil, htl = (il.to("hpu"), tl.to("hpu")) if lengths == "tensor" else (il, tl)
    out = F.ctc_loss(h, targets.to("hpu"), hil, htl, reduction=reduction)
    out.backward(g.to("hpu"))
    torch.testing.assert_close(out.detach().cpu(), ref.detach(), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(h.grad.cpu(), ref_lp.grad, atol=1e-5, rtol=1e-5)
    assert fallback_counter() == {}


def test_f_ctc_loss_unbatched_zero_infinity_and_bad_input():
    lp = torch.randn(4, 5).log_softmax(-1)
    tg = torch.tensor([1, 1, 1, 1])  # needs 7 steps: infinite loss
    for zi in (False, True):
        ref = F.ctc_loss(lp, tg, [4], [4], zero_infinity=zi, reduction="sum")
        out = F.ctc_loss(lp.to("hpu"), tg.to("hpu"), [4], [4], zero_infinity=zi, reduction="sum")
        torch.testing.assert_close(out.cpu(), ref)
    with pytest.raises(RuntimeError, match="blank must be in label range"):
        F.ctc_loss(lp.unsqueeze(1).to("hpu"), tg.unsqueeze(0).to("hpu"), [4], [2], blank=9)
