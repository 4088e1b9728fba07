"""Model families, layouts and usage patterns beyond test_model_families*.py, as Gaudi users
and third-party scripts bring them, and the ops they found falling back or failing:
torchvision's detection ops (nms, roi_align and its backward run on the device as on Gaudi),
detectors in eval. Eager here, lazy from the Makefile's second pass."""
from __future__ import annotations

import copy
import os

import pytest
import torch
from torch import nn

import habana_frameworks.torch.core as htcore
from habana_frameworks.torch._ops import fallback

torchvision = pytest.importorskip("torchvision")
from torchvision import ops  # noqa: E402

LAZY = os.environ.get("PT_HPU_LAZY_MODE") == "1"


def _new_fallbacks(before):
    after = fallback.counts()
    return {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}


def _boxes(n, gen, scale=40.0, dtype=torch.float32):
    b = torch.rand(n, 4, generator=gen, dtype=torch.float64) * scale
    b[:, 2:] += b[:, :2] * 0.5 + 1
    return b.to(dtype)


# ------------------------------------------------------------------ nms

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("iou", [0.0, 0.3, 0.5, 0.9])
def test_nms_native_matches_cpu(dtype, iou):
    gen = torch.Generator().manual_seed(1)
    boxes = _boxes(300, gen, dtype=dtype)
    scores = torch.rand(300, generator=gen, dtype=dtype)
    scores[10:40] = scores[5]  # ties keep the CPU's (stable) order
    boxes[50:60] = boxes[49]   # identical boxes: IoU exactly 1
    idxs = torch.randint(0, 4, (300,), generator=gen)
    before = fallback.counts()
    keep = ops.nms(boxes.to("hpu"), scores.to("hpu"), iou)
    bkeep = ops.batched_nms(boxes.to("hpu"), scores.to("hpu"), idxs.to("hpu"), iou)
    htcore.mark_step()
    assert _new_fallbacks(before) == {}
    assert keep.device.type == "hpu" and keep.dtype == torch.int64
    assert torch.equal(keep.cpu(), ops.nms(boxes, scores, iou))
    assert torch.equal(bkeep.cpu(), ops.batched_nms(boxes, scores, idxs, iou))


def test_nms_empty_and_bad_input():
    e = ops.nms(torch.empty(0, 4, device="hpu"), torch.empty(0, device="hpu"), 0.5)
    assert e.shape == (0,) and e.dtype == torch.int64 and e.device.type == "hpu"
    for b, s, msg in ((torch.rand(5, 3), torch.rand(5), "boxes should have 4 elements in dimension 1"),
                      (torch.rand(5, 4), torch.rand(4), "boxes and scores should have same number of elements"),
                      (torch.rand(5, 4), torch.rand(5).double(), None)):
        with pytest.raises(RuntimeError, match=msg) as cpu_err:
            torch.ops.torchvision.nms(b, s, 0.5)
        with pytest.raises(RuntimeError, match=msg) as hpu_err:
            torch.ops.torchvision.nms(b.to("hpu"), s.to("hpu"), 0.5)
        assert type(hpu_err.value) is type(cpu_err.value)
    # the process keeps working
    assert ops.nms(torch.tensor([[0., 0, 1, 1]], device="hpu"), torch.ones(1, device="hpu"), 0.5).cpu().tolist() == [0]


# ------------------------------------------------------------------ roi_align

def _rois(gen, k=7, batches=2, size=16.0):
    b = _boxes(k, gen, scale=size * 0.8)
    b[0] = torch.tensor([-3.0, -2.0, size + 4, size + 1])  # partly outside the map
    b[1] = torch.tensor([5.0, 5.0, 5.2, 5.1])              # under one pixel
    idx = torch.randint(0, batches, (k, 1), generator=gen).to(b.dtype)
    return torch.cat([idx, b], 1)


@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("sampling_ratio,scale,pooled", [(0, 1.0, (4, 4)), (2, 0.5, (3, 5)), (-1, 0.25, (7, 7))])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_roi_align_forward_backward_native(aligned, sampling_ratio, scale, pooled, dtype):
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(2, 5, 16, 19, generator=gen, dtype=dtype)
    rois = _rois(gen, size=16.0 / scale).to(dtype)
    g = torch.randn(rois.shape[0], 5, *pooled, generator=gen, dtype=dtype)
    xc = x.clone().requires_grad_()
    ref = ops.roi_align(xc, rois, pooled, scale, sampling_ratio, aligned)
    ref.backward(g)
    before = fallback.counts()
    xh = x.to("hpu").requires_grad_()
    out = ops.roi_align(xh, rois.to("hpu"), pooled, scale, sampling_ratio, aligned)
    out.backward(g.to("hpu"))
    htcore.mark_step()
    assert _new_fallbacks(before) == {}
    tol = dict(rtol=1e-6, atol=1e-6) if dtype == torch.float32 else dict(rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(out.detach().cpu(), ref.detach(), **tol)
    torch.testing.assert_close(xh.grad.cpu(), xc.grad, **tol)


def test_roi_align_layouts_and_box_lists():
    """channels_last and sliced feature maps, boxes as a list per image (MultiScaleRoIAlign's
    form), bfloat16 against float32 CPU."""
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(2, 8, 20, 20, generator=gen)
    boxes = [_boxes(4, gen, scale=14.0), _boxes(3, gen, scale=14.0)]
    ref = ops.roi_align(x[:, ::2, 2:], boxes, 5, 0.5, 2, True)
    before = fallback.counts()
    xh = x.to("hpu").contiguous(memory_format=torch.channels_last)
    out = ops.roi_align(xh[:, ::2, 2:], [b.to("hpu") for b in boxes], 5, 0.5, 2, True)
    bf = ops.roi_align(xh.bfloat16(), [b.to("hpu").bfloat16() for b in boxes], 5, 0.5, 2, True)
    htcore.mark_step()
    assert _new_fallbacks(before) == {}
    torch.testing.assert_close(out.cpu(), ref, rtol=1e-6, atol=1e-6)
    assert bf.dtype == torch.bfloat16
    ref_bf = ops.roi_align(x, [b.bfloat16().float() for b in boxes], 5, 0.5, 2, True)
    torch.testing.assert_close(bf.cpu().float(), ref_bf, rtol=2e-2, atol=2e-2)


def test_roi_align_bad_input():
    x, rois = torch.randn(1, 2, 8, 8), torch.tensor([[0.0, 1, 1, 5, 5]])
    for a, r in ((x, rois[:, :4]), (x, rois.double())):
        with pytest.raises(RuntimeError) as cpu_err:
            torch.ops.torchvision.roi_align(a, r, 1.0, 2, 2, 0, False)
        with pytest.raises(RuntimeError) as hpu_err:
            torch.ops.torchvision.roi_align(a.to("hpu"), r.to("hpu"), 1.0, 2, 2, 0, False)
        assert str(cpu_err.value).split("\n")[0] == str(hpu_err.value).split("\n")[0]


# ------------------------------------------------------------------ detectors

def _detector():
    from torchvision.models import detection
    return detection.fasterrcnn_mobilenet_v3_large_320_fpn(
        weights=None, weights_backbone=None, num_classes=5, min_size=64, max_size=64, box_score_thresh=0.0,
        rpn_pre_nms_top_n_test=100, rpn_post_nms_top_n_test=50, box_detections_per_img=20)


def test_detector_eval_native():
    """Faster R-CNN (MobileNetV3-FPN) inference: anchors, box decoding, nms and batched_nms,
    MultiScaleRoIAlign on the device, with the CPU's detections."""
    torch.manual_seed(0)
    model = _detector().eval()
    imgs = [torch.rand(3, 64, 64), torch.rand(3, 56, 64)]
    with torch.no_grad():
        ref = model(imgs)
        mh = copy.deepcopy(model).to("hpu")
        before = fallback.counts()
        out = mh([i.to("hpu") for i in imgs])
        htcore.mark_step()
        assert _new_fallbacks(before) == {}
    for o, r in zip(out, ref):
        assert len(r["boxes"]) > 0
        torch.testing.assert_close(o["boxes"].cpu(), r["boxes"], rtol=1e-4, atol=1e-3)
        torch.testing.assert_close(o["scores"].cpu(), r["scores"], rtol=1e-4, atol=1e-5)
        assert torch.equal(o["labels"].cpu(), r["labels"])


# ------------------------------------------------------------------ attention with a learned bias

@pytest.mark.parametrize("mask_shape", [(2, 5, 5), (1, 2, 5, 5)])
def test_sdpa_float_mask_gets_its_gradient(mask_shape):
    """F.sdpa with a float attn_mask that requires grad (BEiT's and data2vec's relative
    position bias): the mask gets CPU's gradient, as the fused kernel computes none."""
    torch.manual_seed(0)
    q, m = torch.randn(2, 2, 5, 8), torch.randn(*mask_shape)  # leaves per device below
    grads = {}
    for dev in ("cpu", "hpu"):
        qq, mm = q.detach().to(dev).requires_grad_(), m.detach().to(dev).requires_grad_()
        torch.nn.functional.scaled_dot_product_attention(qq, qq * 0.5, qq, attn_mask=mm).pow(2).sum().backward()
        grads[dev] = (qq.grad.cpu(), mm.grad.cpu())
    for a, b in zip(grads["hpu"], grads["cpu"]):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_beit_relative_position_bias_trains():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.BeitConfig(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=1,
                                  num_attention_heads=2, intermediate_size=64, use_relative_position_bias=True)
    model = transformers.BeitModel(cfg)
    mh = copy.deepcopy(model).to("hpu")
    x = torch.randn(2, 3, 32, 32)
    model(x).last_hidden_state.pow(2).mean().backward()
    before = fallback.counts()
    mh(x.to("hpu")).last_hidden_state.pow(2).mean().backward()
    htcore.mark_step()
    assert _new_fallbacks(before) == {}
    for (name, p), q in zip(model.named_parameters(), mh.parameters()):
        assert (q.grad is None) == (p.grad is None), name
        if p.grad is not None:
            torch.testing.assert_close(q.grad.cpu(), p.grad, rtol=1e-4, atol=1e-6, msg=name)


# ------------------------------------------------------------------ families and usage patterns

_TINY = dict(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
             max_position_embeddings=80)


class _Out(nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, x):
        out = self.m(x)
        return out.logits if hasattr(out, "logits") else out.last_hidden_state


def _tf():
    transformers = pytest.importorskip("transformers")
    transformers.logging.set_verbosity_error()
    return transformers


def gpt_bigcode():  # multi-query attention
    T = _tf()
    cfg = T.GPTBigCodeConfig(vocab_size=100, n_embd=32, n_layer=2, n_head=2, n_positions=64, resid_pdrop=0,
                             embd_pdrop=0, attn_pdrop=0)
    return _Out(T.GPTBigCodeForCausalLM(cfg)), torch.randint(0, 100, (2, 8))


def llama_rope_scaling():  # GQA with llama3 rope scaling
    T = _tf()
    rope = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": 16}
    cfg = T.LlamaConfig(num_key_value_heads=1, rope_scaling=rope, **_TINY)
    return _Out(T.LlamaForCausalLM(cfg)), torch.randint(0, 100, (2, 8))


class _Packed(nn.Module):
    """Bidirectional two-layer LSTM and GRU over pack_padded_sequence, an RNN(relu) and a
    projected LSTM."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(8, 16, num_layers=2, bidirectional=True, batch_first=True)
        self.gru = nn.GRU(32, 8, num_layers=2, bidirectional=True, batch_first=True)
        self.rnn = nn.RNN(16, 8, nonlinearity="relu", batch_first=True)
        self.proj = nn.LSTM(8, 16, proj_size=4, batch_first=True)

    def forward(self, x):
        lens = torch.tensor([7, 4])
        o, _ = self.lstm(nn.utils.rnn.pack_padded_sequence(x, lens, batch_first=True))
        o, _ = self.gru(o)
        o, _ = nn.utils.rnn.pad_packed_sequence(o, batch_first=True)
        return self.proj(self.rnn(o)[0])[0]


def packed_rnns():
    return _Packed(), torch.randn(2, 7, 8)


class _Cells(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm, self.gru = nn.LSTMCell(8, 16), nn.GRUCell(16, 16)

    def forward(self, x):
        h = c = g = x.new_zeros(x.shape[0], 16)
        outs = []
        for t in range(x.shape[1]):
            h, c = self.lstm(x[:, t], (h, c))
            g = self.gru(h, g)
            outs.append(g)
        return torch.stack(outs, 1)


def rnn_cells():
    return _Cells(), torch.randn(2, 5, 8)


class _Checkpointed(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8))
        self.b = nn.Sequential(nn.Linear(8, 8), nn.Tanh())
        self.ln = nn.LayerNorm(8)

    def forward(self, x):
        from torch.utils.checkpoint import checkpoint
        y = checkpoint(self.a, x, use_reentrant=False)
        return self.ln(checkpoint(self.b, y, use_reentrant=True))


def checkpointed():
    return _Checkpointed(), torch.randn(4, 8, requires_grad=True)


FAMILIES = {"gpt_bigcode": gpt_bigcode, "llama_rope_scaling": llama_rope_scaling,
            "packed_rnns": packed_rnns, "rnn_cells": rnn_cells, "checkpointed": checkpointed}


def _step(model, x):
    loss = model(x).float().pow(2).mean()
    loss.backward()
    return loss, [p.grad for p in model.parameters() if p.grad is not None]


def _err(grads, ref) -> float:
    scale = max(float(r.abs().max()) for r in ref)
    return max(float((g.double().cpu() - r).abs().max()) for g, r in zip(grads, ref)) / scale


@pytest.mark.parametrize("family", FAMILIES)
def test_family_trains_natively(family):
    """One step (forward, backward, clip_grad_norm_, AdamW) on hpu with no CPU fallback,
    judged against float64 CPU as in test_model_families_more.py."""
    torch.manual_seed(0)
    model, x = FAMILIES[family]()
    m64, m32, mh = copy.deepcopy(model).double(), copy.deepcopy(model), copy.deepcopy(model).to("hpu")
    fx = x.is_floating_point()
    l64, g64 = _step(m64, x.detach().double().requires_grad_(x.requires_grad) if fx else x)
    _, g32 = _step(m32, x.detach().requires_grad_(x.requires_grad) if fx else x)
    before = fallback.counts()
    lh, gh = _step(mh, x.detach().to("hpu").requires_grad_(x.requires_grad) if fx else x.to("hpu"))
    gh = [g.detach().clone() for g in gh]
    torch.nn.utils.clip_grad_norm_(mh.parameters(), 1.0)
    torch.optim.AdamW(mh.parameters(), lr=1e-3).step()
    htcore.mark_step()
    assert _new_fallbacks(before) == {}
    assert len(gh) == len(g64)
    eh, e32 = _err(gh, g64), _err(g32, g64)
    assert eh <= max(8 * e32, 3e-6), f"{family}: hpu grads {eh:.2e} from float64, CPU float32 {e32:.2e}"
    assert abs(float(lh.cpu()) - float(l64)) <= 1e-5 * abs(float(l64)) + 1e-7
    assert all(torch.isfinite(p.detach().cpu()).all() for p in mh.parameters())
