"""Real model families (torchvision and Hugging Face transformers, tiny configs built from
code, no downloads) train one step on hpu with no CPU fallback, in eager mode and (from the
Makefile's lazy pass) in lazy mode, contiguous and channels_last.

Precision is judged against a float64 CPU reference: the hpu float32 gradients may be no
further from it than a small multiple of PyTorch's own float32 CPU gradients (plus a floor
of a few float32 ulps of the largest gradient, since CPU float32 can land on the reference
by luck). For convolutional models PyTorch's float32 error is taken as the larger of its
contiguous and channels_last runs: both are equally valid float32 orders, and a ReLU whose
input is within float32 noise of zero (shufflenet_v2 at seed 0: -5.1e-5 exactly, CPU's
own error there 3.7e-5) flips its mask in one order and not the other, which moves every
upstream gradient by about 1e-2 of the largest: a discontinuity, not lost precision
(tests/test_model_families.py::test_shufflenet_outlier_is_a_relu_mask_flip)."""
from __future__ import annotations

import copy
import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import habana_frameworks.torch.core as htcore  # noqa: E402
from habana_frameworks.torch._ops import fallback  # noqa: E402

torchvision = pytest.importorskip("torchvision")
transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()

FACTOR = 8.0      # hpu error may be this multiple of CPU float32's error ...
FLOOR = 3e-6      # ... or this fraction of the largest reference gradient, if larger


def _tv():
    from torchvision import models as tvm
    return tvm


def resnet():
    # torchvision's own residual blocks (basic and bottleneck, with strided downsampling
    # shortcuts) at narrow widths: resnet18's 11M parameters would make the float64
    # reference the slowest part of the suite
    from torchvision.models.resnet import BasicBlock, Bottleneck, conv1x1
    bn = torch.nn.BatchNorm2d

    def down(cin, cout):
        return torch.nn.Sequential(conv1x1(cin, cout, 2), bn(cout))
    m = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 7, 2, 3, bias=False), bn(16), torch.nn.ReLU(inplace=True),
        torch.nn.MaxPool2d(3, 2, 1),
        BasicBlock(16, 16), BasicBlock(16, 32, 2, down(16, 32)),
        Bottleneck(32, 16, 2, down(32, 64)), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
        torch.nn.Linear(64, 10))
    return m, torch.randn(2, 3, 32, 32)


def mobilenet_v3():
    from torchvision.models.mobilenetv3 import MobileNetV3, InvertedResidualConfig as IRC
    # squeeze-excitation (hardsigmoid) and hardswish blocks, as in mobilenet_v3_small
    setting = [IRC(8, 3, 8, 8, True, "RE", 2, 1, 1.0), IRC(8, 3, 24, 16, False, "RE", 2, 1, 1.0),
               IRC(16, 5, 48, 16, True, "HS", 1, 1, 1.0)]
    return MobileNetV3(setting, last_channel=32, num_classes=10, dropout=0.0), torch.randn(2, 3, 32, 32)


def efficientnet():
    from torchvision.models.efficientnet import EfficientNet, MBConvConfig
    setting = [MBConvConfig(1, 3, 1, 8, 8, 1), MBConvConfig(4, 5, 2, 8, 16, 1), MBConvConfig(4, 3, 2, 16, 16, 1)]
    m = EfficientNet(setting, dropout=0.0, stochastic_depth_prob=0.0, num_classes=10, last_channel=32)
    return m, torch.randn(2, 3, 32, 32)


def convnext():
    from torchvision.models.convnext import ConvNeXt, CNBlockConfig
    # 32x32: the last stage is 1x1 under a 7x7 depthwise kernel (every tap but the centre
    # misses the input: the geometry that once panicked).
    m = ConvNeXt([CNBlockConfig(8, 16, 1), CNBlockConfig(16, 24, 1), CNBlockConfig(24, None, 1)],
                 stochastic_depth_prob=0.0, num_classes=10)
    return m, torch.randn(2, 3, 32, 32)


def shufflenet():
    from torchvision.models.shufflenetv2 import ShuffleNetV2
    return ShuffleNetV2([1, 1, 1], [8, 16, 32, 64, 64], num_classes=10), torch.randn(2, 3, 32, 32)


def shufflenet_v2_x0_5():
    return _tv().shufflenet_v2_x0_5(num_classes=10), torch.randn(2, 3, 64, 64)


def vit():
    m = _tv().VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32,
                                mlp_dim=64, num_classes=10)
    torch.nn.init.normal_(m.heads.head.weight, std=0.1)  # zero-initialised: no gradient below it
    return m, torch.randn(2, 3, 32, 32)


class _Seq(torch.nn.Module):
    """An RNN's output sequence as the model output."""

    def __init__(self, rnn):
        super().__init__()
        self.rnn = rnn

    def forward(self, x):
        return self.rnn(x)[0]


def lstm():
    return _Seq(torch.nn.LSTM(8, 16, num_layers=2, batch_first=True)), torch.randn(2, 5, 8)


def gru():
    return _Seq(torch.nn.GRU(8, 16, num_layers=2, batch_first=True)), torch.randn(2, 5, 8)


class _LM(torch.nn.Module):
    """A transformers model's logits (for T5, with labels, so the decoder runs)."""

    def __init__(self, m, labels=False):
        super().__init__()
        self.m, self.labels = m, labels

    def forward(self, ids):
        if self.labels:
            return self.m(input_ids=ids, labels=ids).logits
        out = self.m(input_ids=ids)
        return out.logits if hasattr(out, "logits") else out.last_hidden_state


def _ids():
    return torch.randint(0, 100, (2, 8))


def bert():
    T = transformers
    cfg = T.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                       intermediate_size=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                       max_position_embeddings=32)
    return _LM(T.BertModel(cfg, add_pooling_layer=False)), _ids()


def gpt2():
    T = transformers
    cfg = T.GPT2Config(vocab_size=100, n_embd=32, n_layer=2, n_head=2, n_positions=32, resid_pdrop=0.0,
                       embd_pdrop=0.0, attn_pdrop=0.0)
    return _LM(T.GPT2LMHeadModel(cfg)), _ids()


def llama():
    T = transformers
    cfg = T.LlamaConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        num_key_value_heads=1, intermediate_size=64, max_position_embeddings=32)
    return _LM(T.LlamaForCausalLM(cfg)), _ids()


def t5():
    T = transformers
    cfg = T.T5Config(vocab_size=100, d_model=32, d_ff=64, d_kv=16, num_layers=2, num_heads=2, dropout_rate=0.0,
                     decoder_start_token_id=0, pad_token_id=0)
    return _LM(T.T5ForConditionalGeneration(cfg), labels=True), _ids()


FAMILIES = {"resnet": resnet, "mobilenet_v3": mobilenet_v3, "efficientnet": efficientnet, "convnext": convnext,
            "shufflenet": shufflenet, "vit": vit, "lstm": lstm, "gru": gru, "bert": bert, "gpt2": gpt2,
            "llama": llama, "t5": t5}
CHANNELS_LAST = ("resnet", "mobilenet_v3", "efficientnet", "convnext", "shufflenet")
CASES = [(f, False) for f in FAMILIES] + [(f, True) for f in CHANNELS_LAST]


def _step(model, x):
    """One step's forward and backward; returns the loss and the parameter gradients."""
    out = model(x)
    loss = out.float().pow(2).mean()
    loss.backward()
    return loss, [p.grad for p in model.parameters() if p.grad is not None]


def _err(grads, ref) -> float:
    scale = max(float(r.abs().max()) for r in ref)
    return max(float((g.double().cpu() - r).abs().max()) for g, r in zip(grads, ref)) / scale


@pytest.mark.parametrize("family,channels_last", CASES,
                         ids=[f + ("-channels_last" if cl else "") for f, cl in CASES])
def test_family_trains_natively(family, channels_last):
    torch.manual_seed(0)
    model, x = FAMILIES[family]()
    model.train()
    m64, m32, mh = copy.deepcopy(model).double(), copy.deepcopy(model), copy.deepcopy(model).to("hpu")
    x64 = x.double() if x.is_floating_point() else x
    xh = x.to("hpu")
    if channels_last:
        m64, m32, mh = (m.to(memory_format=torch.channels_last) for m in (m64, m32, mh))
        x64, x, xh = (t.contiguous(memory_format=torch.channels_last) for t in (x64, x, xh))

    l64, g64 = _step(m64, x64)
    l32, g32 = _step(m32, x)
    e32 = _err(g32, g64)
    if family in CHANNELS_LAST:
        # the other float32 layout on CPU (see the module docstring)
        other = copy.deepcopy(model).to(memory_format=torch.contiguous_format if channels_last else torch.channels_last)
        xo = x.contiguous(memory_format=torch.contiguous_format if channels_last else torch.channels_last)
        e32 = max(e32, _err(_step(other, xo)[1], g64))
    before = fallback.counts()
    lh, gh = _step(mh, xh)
    opt = torch.optim.SGD(mh.parameters(), lr=0.1, momentum=0.9)
    opt.step()
    htcore.mark_step()
    lh_v = float(lh.cpu())
    gh = [g.cpu() for g in gh]
    after = fallback.counts()
    fell_back = {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}
    assert fell_back == {}, f"{family}: CPU fallbacks {fell_back}"

    assert len(gh) == len(g64)
    eh = _err(gh, g64)
    assert eh <= max(FACTOR * e32, FLOOR), f"{family}: hpu grads {eh:.2e} from float64, CPU float32 {e32:.2e}"
    ref_loss = float(l64)
    assert abs(lh_v - ref_loss) <= max(FACTOR * abs(float(l32) - ref_loss), FLOOR * abs(ref_loss) + 1e-7)
    # the optimizer step ran on hpu and moved the weights as on CPU
    p0 = next(mh.parameters())
    assert p0.device.type == "hpu" and torch.isfinite(p0.cpu()).all()


def test_shufflenet_outlier_is_a_relu_mask_flip():
    """The issue's precision outlier (shufflenet_v2_x0_5, batch 2, 64x64, seed 0: hpu
    gradients ~100x further from float64 than CPU float32's) is reproduced by PyTorch's own
    CPU float32 in channels_last: one ReLU input is -5.1e-5 in float64, inside float32's
    noise, and its mask decides the upstream gradients."""
    torch.manual_seed(0)
    model, x = shufflenet_v2_x0_5()
    model.train()
    _, g64 = _step(copy.deepcopy(model).double(), x.double())
    _, g32 = _step(copy.deepcopy(model), x)
    _, gcl = _step(copy.deepcopy(model).to(memory_format=torch.channels_last),
                   x.contiguous(memory_format=torch.channels_last))
    _, gh = _step(copy.deepcopy(model).to("hpu"), x.to("hpu"))
    e32, ecl, eh = _err(g32, g64), _err(gcl, g64), _err([g.cpu() for g in gh], g64)
    assert e32 < 2e-4 and ecl > 1e-3, (e32, ecl)  # CPU's two layouts disagree by the flip
    assert eh <= 2 * ecl, (eh, ecl)
