"""Model builders for tests/test_model_families_s19.py (and the hand sweep that chose them):
torchvision and Hugging Face transformers families nobody here wrote, at tiny sizes built from
their own classes and configs (no downloads). Each builder returns (model, input, kind):
kind "train" (one training step) or "eval" (detectors: inference only).

The session-19 sweep ran every builder here (s3d aside: its fixed (2, 7, 7) head pool needs
16x224x224 clips) eager and lazy, plain and channels_last: no CPU fallback, no error, hpu's
gradients within 8x CPU float32's distance from float64 everywhere. googlenet, mnasnet and
reformer (LSH bucket ties) keep float32 references far from float64 (1e-4..4e-2 of the largest
gradient) even at these sizes; inception_v3 needs 299x299 for its aux head."""
from __future__ import annotations

import os

import torch
from torch import nn

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


class Out(nn.Module):
    """A model's main tensor output(s) summed into one tensor for the loss: logits, last hidden
    state, segmentation map, or the sum of a tuple's tensors (GoogLeNet's aux logits)."""

    def __init__(self, m, **kw):
        super().__init__()
        self.m, self.kw = m, kw

    def forward(self, x):
        dt = next((p.dtype for p in self.m.parameters() if p.is_floating_point()), None)
        kw = {k: (v.to(x.device, dt) if v.is_floating_point() else v.to(x.device)) if torch.is_tensor(v) else v
              for k, v in self.kw.items()}
        out = self.m(x, **kw) if x is not None else self.m(**kw)
        return pick(out)


def pick(out):
    for name in ("logits", "last_hidden_state", "out", "pred_masks", "spectrogram", "pooler_output",
                 "logits_per_image"):
        if isinstance(out, dict) and name in out and torch.is_tensor(out[name]):
            return out[name]
        if not isinstance(out, dict) and hasattr(out, name) and torch.is_tensor(getattr(out, name)):
            return getattr(out, name)
    if isinstance(out, (tuple, list)):
        ts = [pick(o) for o in out if o is not None]
        ts = [t for t in ts if torch.is_tensor(t)]
        return sum(t.float().pow(2).mean() for t in ts)
    return out


def _ids(n=8, vocab=100, batch=2):
    return torch.randint(3, vocab, (batch, n))


def _img(size=32, batch=2, ch=3):
    return torch.randn(batch, ch, size, size)


# ------------------------------------------------------------------ torchvision

def regnet():
    from torchvision.models.regnet import RegNet, BlockParams
    bp = BlockParams.from_init_params(depth=3, w_0=8, w_a=8.0, w_m=2.0, group_width=8, se_ratio=0.25)
    return RegNet(bp, num_classes=10, stem_width=8), _img(32), "train"


def mnasnet():
    from torchvision.models import MNASNet
    return MNASNet(0.25, num_classes=10, dropout=0.0), _img(64), "train"


def squeezenet():
    from torchvision.models import SqueezeNet
    m = SqueezeNet("1_1", num_classes=10, dropout=0.0)
    return m, _img(48), "train"


def googlenet():
    from torchvision.models import GoogLeNet
    # aux_logits in training: the forward returns (logits, aux2, aux1)
    m = GoogLeNet(num_classes=10, aux_logits=True, transform_input=True, init_weights=False, dropout=0.0,
                  dropout_aux=0.0)
    # at 32x32 inception5's maps are 1x1 (its batch norms see two values a channel) and CPU
    # float32's gradients are 0.1 of the largest from float64; at 64x64, 7e-3 (hpu: 4e-4)
    return Out(m), _img(64), "train"


def inception_v3():
    from torchvision.models import Inception3
    m = Inception3(num_classes=10, aux_logits=True, transform_input=False, init_weights=False, dropout=0.0)
    # the aux head (5x5 average pool, then a 5x5 conv) needs Mixed_6e's 17x17 map: a 299x299 input
    return Out(m), _img(299, batch=2), "train"


def vgg11_bn():
    from torchvision.models.vgg import VGG, make_layers
    m = VGG(make_layers([8, "M", 16, "M", 16, 16, "M", 32, 32, "M"], batch_norm=True), num_classes=10,
            init_weights=True, dropout=0.0)
    m.avgpool = nn.AdaptiveAvgPool2d((2, 2))
    m.classifier = nn.Sequential(nn.Linear(32 * 4, 32), nn.ReLU(True), nn.Dropout(0.0), nn.Linear(32, 10))
    return m, _img(32), "train"


def alexnet():
    from torchvision.models import AlexNet
    m = AlexNet(num_classes=10, dropout=0.0)
    m.avgpool = nn.AdaptiveAvgPool2d((2, 2))
    m.classifier = nn.Sequential(nn.Linear(256 * 4, 32), nn.ReLU(True), nn.Linear(32, 10))
    return m, _img(64), "train"


def efficientnet_v2():
    from torchvision.models.efficientnet import EfficientNet, FusedMBConvConfig, MBConvConfig
    setting = [FusedMBConvConfig(1, 3, 1, 8, 8, 1), FusedMBConvConfig(4, 3, 2, 8, 16, 1),
               MBConvConfig(4, 3, 2, 16, 24, 1), MBConvConfig(6, 3, 1, 24, 32, 1)]
    return EfficientNet(setting, dropout=0.0, stochastic_depth_prob=0.0, num_classes=10, last_channel=64), \
        _img(32), "train"


def maxvit():
    from torchvision.models import MaxVit
    return MaxVit(input_size=(32, 32), stem_channels=8, partition_size=4, block_channels=[16, 32],
                  block_layers=[1, 1], head_dim=8, stochastic_depth_prob=0.0, num_classes=10), _img(32), "train"


def swin_v2():
    from torchvision.models.swin_transformer import SwinTransformer, SwinTransformerBlockV2, PatchMergingV2
    return SwinTransformer(patch_size=[4, 4], embed_dim=16, depths=[2, 2], num_heads=[2, 2], window_size=[4, 4],
                           stochastic_depth_prob=0.0, num_classes=10, block=SwinTransformerBlockV2,
                           downsample_layer=PatchMergingV2), _img(32), "train"


def mobilenet_v2():
    from torchvision.models import MobileNetV2
    setting = [[1, 8, 1, 1], [6, 16, 2, 2], [6, 24, 1, 2]]
    return MobileNetV2(num_classes=10, width_mult=0.5, inverted_residual_setting=setting, dropout=0.0), \
        _img(32), "train"


def _bottleneck_net(groups, base_width):
    from torchvision.models.resnet import Bottleneck, conv1x1
    bn = nn.BatchNorm2d

    def down(cin, cout, s):
        return nn.Sequential(conv1x1(cin, cout, s), bn(cout))
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, 1, 1, bias=False), bn(16), nn.ReLU(inplace=True),
        Bottleneck(16, 8, 1, down(16, 32, 1), groups=groups, base_width=base_width),
        Bottleneck(32, 16, 2, down(32, 64, 2), groups=groups, base_width=base_width),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))


def resnext():
    return _bottleneck_net(groups=4, base_width=16), _img(16), "train"


def wide_resnet():
    return _bottleneck_net(groups=1, base_width=128), _img(16), "train"


def mvit():
    from torchvision.models.video.mvit import MViT, MSBlockConfig
    cfg = [MSBlockConfig(1, 16, 16, [3, 3, 3], [3, 3, 3], [1, 1, 1], [1, 2, 2]),
           MSBlockConfig(2, 16, 32, [3, 3, 3], [3, 3, 3], [1, 2, 2], [1, 1, 1])]
    m = MViT(spatial_size=(32, 32), temporal_size=8, block_setting=cfg, residual_pool=True,
             residual_with_cls_embed=False, rel_pos_embed=True, proj_after_attn=True, dropout=0.0, num_classes=10,
             patch_embed_kernel=(3, 7, 7), patch_embed_stride=(2, 4, 4), patch_embed_padding=(1, 3, 3))
    # MViT's first MSBlockConfig input channels are the patch embedding's width
    return m, torch.randn(2, 3, 8, 32, 32), "train"


def s3d():
    # S3D's head is a fixed (2, 7, 7) average pool: it needs 16x224x224 clips (8M parameters),
    # too slow for a float64 reference here; not in the sweep's lists
    from torchvision.models.video import S3D
    return S3D(num_classes=10, dropout=0.0), torch.randn(2, 3, 16, 224, 224), "train"


class _SegBackbone(nn.Module):
    """A small strided conv backbone returning torchvision's {"out", "aux"} feature dict."""

    def __init__(self):
        super().__init__()
        self.low = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.BatchNorm2d(8), nn.ReLU())
        self.high = nn.Sequential(nn.Conv2d(8, 16, 3, 2, 1, dilation=1), nn.BatchNorm2d(16), nn.Hardswish(),
                                  nn.Conv2d(16, 16, 3, 1, 2, dilation=2), nn.BatchNorm2d(16), nn.ReLU())

    def forward(self, x):
        low = self.low(x)
        return {"low": low, "aux": low, "out": self.high(low), "high": self.high(low)}


def _no_dropout(m):
    for mod in m.modules():
        if isinstance(mod, nn.Dropout):
            mod.p = 0.0
    return m


def deeplabv3():
    from torchvision.models.segmentation.deeplabv3 import DeepLabV3, DeepLabHead
    from torchvision.models.segmentation.fcn import FCNHead
    # ASPP's image pooling branch batch-normalises one value a sample: a batch of 4
    m = DeepLabV3(_SegBackbone(), DeepLabHead(16, 5, atrous_rates=(2, 4, 6)), FCNHead(8, 5))
    return Out(_no_dropout(m)), _img(32, batch=4), "train"


def fcn():
    from torchvision.models.segmentation.fcn import FCN, FCNHead
    return Out(_no_dropout(FCN(_SegBackbone(), FCNHead(16, 5), None))), _img(32), "train"


def lraspp():
    from torchvision.models.segmentation.lraspp import LRASPP
    return Out(LRASPP(_SegBackbone(), 8, 16, 5, inter_channels=16)), _img(32), "train"


def _det_kw():
    return dict(weights=None, weights_backbone=None, num_classes=5)


def ssdlite():
    from torchvision.models import detection
    m = detection.ssdlite320_mobilenet_v3_large(**_det_kw(), score_thresh=0.0, detections_per_img=20,
                                                topk_candidates=50, width_mult=0.25)
    return m, [torch.rand(3, 64, 64), torch.rand(3, 48, 64)], "eval"


def retinanet():
    from torchvision.models import detection
    m = detection.retinanet_resnet50_fpn(**_det_kw(), min_size=64, max_size=64, score_thresh=0.0,
                                         detections_per_img=20, topk_candidates=50, trainable_backbone_layers=5)
    return m, [torch.rand(3, 64, 64), torch.rand(3, 48, 64)], "eval"


def fcos():
    from torchvision.models import detection
    m = detection.fcos_resnet50_fpn(**_det_kw(), min_size=64, max_size=64, score_thresh=0.0,
                                    detections_per_img=20, topk_candidates=50, trainable_backbone_layers=5)
    return m, [torch.rand(3, 64, 64), torch.rand(3, 48, 64)], "eval"


def maskrcnn():
    from torchvision.models import detection
    m = detection.maskrcnn_resnet50_fpn(**_det_kw(), min_size=64, max_size=64, box_score_thresh=0.0,
                                        rpn_pre_nms_top_n_test=100, rpn_post_nms_top_n_test=50,
                                        box_detections_per_img=10, trainable_backbone_layers=5)
    return m, [torch.rand(3, 64, 64), torch.rand(3, 48, 64)], "eval"


# ------------------------------------------------------------------ transformers

def _T():
    import transformers
    transformers.logging.set_verbosity_error()
    return transformers


_BERTLIKE = dict(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                 max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
_DEC = dict(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
            max_position_embeddings=64)


def roberta():
    T = _T()
    return Out(T.RobertaForMaskedLM(T.RobertaConfig(pad_token_id=1, **_BERTLIKE))), _ids(), "train"


def xlm_roberta():
    T = _T()
    return Out(T.XLMRobertaForSequenceClassification(T.XLMRobertaConfig(pad_token_id=1, num_labels=3, **_BERTLIKE))), \
        _ids(), "train"


def albert():
    T = _T()
    cfg = T.AlbertConfig(embedding_size=16, **_BERTLIKE)
    return Out(T.AlbertForMaskedLM(cfg)), _ids(), "train"


def electra():
    T = _T()
    cfg = T.ElectraConfig(embedding_size=16, **_BERTLIKE)
    return Out(T.ElectraForPreTraining(cfg)), _ids(), "train"


def distilbert():
    T = _T()
    cfg = T.DistilBertConfig(vocab_size=100, dim=32, n_layers=2, n_heads=2, hidden_dim=64, max_position_embeddings=64,
                             dropout=0.0, attention_dropout=0.0, seq_classif_dropout=0.0)
    return Out(T.DistilBertForSequenceClassification(cfg)), _ids(), "train"


def layoutlm():
    T = _T()
    cfg = T.LayoutLMConfig(max_2d_position_embeddings=64, **_BERTLIKE)
    bbox = torch.randint(0, 30, (2, 8, 4))
    bbox[..., 2:] += bbox[..., :2]
    return Out(T.LayoutLMForTokenClassification(cfg), bbox=bbox), _ids(), "train"


def _seq2seq(cls, cfg_cls, **extra):
    T = _T()
    cfg = getattr(T, cfg_cls)(vocab_size=100, d_model=32, encoder_layers=1, decoder_layers=1,
                              encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                              decoder_ffn_dim=64, max_position_embeddings=64, dropout=0.0, attention_dropout=0.0,
                              activation_dropout=0.0, pad_token_id=1, bos_token_id=0, eos_token_id=2,
                              decoder_start_token_id=2, **extra)
    return Out(getattr(T, cls)(cfg), decoder_input_ids=_ids(5)), _ids(), "train"


def bart():
    return _seq2seq("BartForConditionalGeneration", "BartConfig")


def pegasus():
    return _seq2seq("PegasusForConditionalGeneration", "PegasusConfig")


def marian():
    return _seq2seq("MarianMTModel", "MarianConfig")


def mt5():
    T = _T()
    cfg = T.MT5Config(vocab_size=100, d_model=32, d_kv=8, d_ff=64, num_layers=1, num_decoder_layers=1, num_heads=2,
                      dropout_rate=0.0, relative_attention_num_buckets=8, decoder_start_token_id=0)
    return Out(T.MT5ForConditionalGeneration(cfg), decoder_input_ids=_ids(5)), _ids(), "train"


def opt():
    T = _T()
    cfg = T.OPTConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, ffn_dim=64, num_attention_heads=2,
                      max_position_embeddings=64, word_embed_proj_dim=16, dropout=0.0, attention_dropout=0.0)
    return Out(T.OPTForCausalLM(cfg)), _ids(), "train"


def gpt_neox():
    T = _T()
    cfg = T.GPTNeoXConfig(rotary_pct=0.5, use_parallel_residual=True, hidden_dropout=0.0, attention_dropout=0.0,
                          **_DEC)
    return Out(T.GPTNeoXForCausalLM(cfg)), _ids(), "train"


def gptj():
    T = _T()
    cfg = T.GPTJConfig(vocab_size=100, n_positions=64, n_embd=32, n_layer=2, n_head=4, rotary_dim=4, n_inner=64,
                       resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    return Out(T.GPTJForCausalLM(cfg)), _ids(), "train"


def falcon():
    T = _T()
    cfg = T.FalconConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                         new_decoder_architecture=True, num_kv_heads=2, alibi=False, hidden_dropout=0.0,
                         attention_dropout=0.0, max_position_embeddings=64)
    return Out(T.FalconForCausalLM(cfg)), _ids(), "train"


def falcon_alibi():
    T = _T()
    cfg = T.FalconConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                         multi_query=True, alibi=True, parallel_attn=False, bias=True, hidden_dropout=0.0,
                         attention_dropout=0.0)
    return Out(T.FalconForCausalLM(cfg)), _ids(), "train"


def mistral():
    T = _T()
    cfg = T.MistralConfig(num_key_value_heads=2, sliding_window=4, **_DEC)
    return Out(T.MistralForCausalLM(cfg)), _ids(), "train"


def qwen2():
    T = _T()
    cfg = T.Qwen2Config(num_key_value_heads=2, **_DEC)
    return Out(T.Qwen2ForCausalLM(cfg)), _ids(), "train"


def qwen2_moe():
    T = _T()
    cfg = T.Qwen2MoeConfig(num_key_value_heads=2, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16,
                           shared_expert_intermediate_size=32, decoder_sparse_step=1, **_DEC)
    return Out(T.Qwen2MoeForCausalLM(cfg)), _ids(), "train"


def phi():
    T = _T()
    cfg = T.PhiConfig(partial_rotary_factor=0.5, resid_pdrop=0.0, embd_pdrop=0.0, attention_dropout=0.0,
                      qk_layernorm=True, **_DEC)
    return Out(T.PhiForCausalLM(cfg)), _ids(), "train"


def phi3():
    T = _T()
    cfg = T.Phi3Config(num_key_value_heads=2, pad_token_id=0, bos_token_id=1, eos_token_id=2, **_DEC)
    return Out(T.Phi3ForCausalLM(cfg)), _ids(), "train"


def gemma():
    T = _T()
    cfg = T.GemmaConfig(num_key_value_heads=1, head_dim=8, **_DEC)
    return Out(T.GemmaForCausalLM(cfg)), _ids(), "train"


def gemma2():
    T = _T()
    cfg = T.Gemma2Config(num_key_value_heads=2, head_dim=8, sliding_window=4, query_pre_attn_scalar=8,
                         attn_logit_softcapping=50.0, final_logit_softcapping=30.0, **_DEC)
    return Out(T.Gemma2ForCausalLM(cfg)), _ids(), "train"


def stablelm():
    T = _T()
    cfg = T.StableLmConfig(num_key_value_heads=2, partial_rotary_factor=0.25, use_qkv_bias=True,
                           qk_layernorm=False, **_DEC)
    return Out(T.StableLmForCausalLM(cfg)), _ids(), "train"


def starcoder2():
    T = _T()
    cfg = T.Starcoder2Config(num_key_value_heads=2, sliding_window=4, residual_dropout=0.0, embedding_dropout=0.0,
                             **_DEC)
    return Out(T.Starcoder2ForCausalLM(cfg)), _ids(), "train"


def _vis(T, cls, **kw):
    return getattr(T, cls)(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           image_size=16, patch_size=4, **kw)


def clip():
    T = _T()
    cfg = T.CLIPConfig(text_config=dict(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                        num_attention_heads=2, max_position_embeddings=16),
                       vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                          num_attention_heads=2, image_size=16, patch_size=4),
                       projection_dim=16)
    return Out(T.CLIPModel(cfg), pixel_values=torch.randn(2, 3, 16, 16)), _ids(), "train"


def siglip():
    T = _T()
    cfg = T.SiglipConfig(text_config=dict(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                          num_attention_heads=2, max_position_embeddings=16),
                         vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                            num_attention_heads=2, image_size=16, patch_size=4))
    return Out(T.SiglipModel(cfg), pixel_values=torch.randn(2, 3, 16, 16)), _ids(), "train"


def blip():
    T = _T()
    cfg = T.BlipConfig(text_config=dict(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                        num_attention_heads=2, max_position_embeddings=16, encoder_hidden_size=32),
                       vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                          num_attention_heads=2, image_size=16, patch_size=4),
                       projection_dim=16, image_text_hidden_size=16)
    return Out(T.BlipModel(cfg), pixel_values=torch.randn(2, 3, 16, 16)), _ids(), "train"


def segformer():
    T = _T()
    cfg = T.SegformerConfig(num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[8, 16],
                            patch_sizes=[7, 3], strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2],
                            decoder_hidden_size=16, num_labels=4, hidden_dropout_prob=0.0,
                            attention_probs_dropout_prob=0.0, classifier_dropout_prob=0.0, drop_path_rate=0.0)
    return Out(T.SegformerForSemanticSegmentation(cfg)), _img(32), "train"


def mobilevit():
    T = _T()
    cfg = T.MobileViTConfig(image_size=32, patch_size=2, hidden_sizes=[16, 24, 32], neck_hidden_sizes=[8, 8, 16, 16, 24,
                            32, 48], num_attention_heads=2, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                            classifier_dropout_prob=0.0, num_labels=10)
    return Out(T.MobileViTForImageClassification(cfg)), _img(32), "train"


def convnextv2():
    T = _T()
    cfg = T.ConvNextV2Config(num_channels=3, patch_size=2, num_stages=2, hidden_sizes=[8, 16], depths=[1, 1], num_labels=10,
                             drop_path_rate=0.0)
    return Out(T.ConvNextV2ForImageClassification(cfg)), _img(16), "train"


def dinov2():
    T = _T()
    cfg = T.Dinov2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, mlp_ratio=2, image_size=16,
                         patch_size=4, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, layerscale_value=1.0,
                         num_labels=10)
    # the position embeddings are interpolated (bicubic) to the 20x20 input's grid
    return Out(T.Dinov2ForImageClassification(cfg)), _img(20), "train"


def detr():
    T = _T()
    backbone = T.ResNetConfig(num_channels=3, embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1],
                              layer_type="basic", out_features=["stage2"])
    cfg = T.DetrConfig(use_timm_backbone=False, backbone_config=backbone, use_pretrained_backbone=False,
                       num_queries=5, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                       decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, dropout=0.0,
                       attention_dropout=0.0, num_labels=4, auxiliary_loss=False)
    return Out(T.DetrForObjectDetection(cfg)), _img(32), "train"


def yolos():
    T = _T()
    cfg = T.YolosConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                        image_size=[16, 16], patch_size=4, num_detection_tokens=5, num_labels=4,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    return Out(T.YolosForObjectDetection(cfg)), _img(16), "train"


def longformer():
    T = _T()
    cfg = T.LongformerConfig(attention_window=4, pad_token_id=1, **_BERTLIKE)
    gm = torch.zeros(2, 16, dtype=torch.long)
    gm[:, 0] = 1
    return Out(T.LongformerForMaskedLM(cfg), global_attention_mask=gm), _ids(16), "train"


def bigbird():
    T = _T()
    cfg = T.BigBirdConfig(attention_type="block_sparse", block_size=2, num_random_blocks=1,
                          **{**_BERTLIKE, "max_position_embeddings": 128})
    return Out(T.BigBirdForMaskedLM(cfg)), _ids(32), "train"


def reformer():
    T = _T()
    cfg = T.ReformerConfig(vocab_size=100, hidden_size=32, num_attention_heads=2, attention_head_size=16,
                           attn_layers=["local", "lsh"], feed_forward_size=64, axial_pos_shape=[4, 4],
                           axial_pos_embds_dim=[16, 16], max_position_embeddings=16, local_attn_chunk_length=4,
                           lsh_attn_chunk_length=4, num_buckets=2, num_hashes=1, is_decoder=True,
                           hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                           local_attention_probs_dropout_prob=0.0, lsh_attention_probs_dropout_prob=0.0,
                           axial_pos_embds=True, seed=0)
    return Out(T.ReformerModelWithLMHead(cfg)), _ids(16), "train"


def rwkv():
    T = _T()
    cfg = T.RwkvConfig(vocab_size=100, context_length=16, hidden_size=32, num_hidden_layers=2, attention_hidden_size=32,
                       intermediate_size=64)
    return Out(T.RwkvForCausalLM(cfg)), _ids(), "train"


def hubert():
    T = _T()
    cfg = T.HubertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                         conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16,
                         num_conv_pos_embedding_groups=4, hidden_dropout=0.0, attention_dropout=0.0,
                         activation_dropout=0.0, feat_proj_dropout=0.0, layerdrop=0.0, mask_time_prob=0.0,
                         feat_extract_norm="layer", do_stable_layer_norm=True, conv_bias=True)
    return Out(T.HubertModel(cfg)), torch.randn(2, 400), "train"


def speecht5():
    T = _T()
    cfg = T.SpeechT5Config(vocab_size=100, hidden_size=32, encoder_layers=1, decoder_layers=1,
                           encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                           decoder_ffn_dim=64, num_mel_bins=8, speech_decoder_prenet_units=16,
                           speech_decoder_postnet_layers=2, speech_decoder_postnet_units=16,
                           speech_decoder_postnet_kernel=3, reduction_factor=1, hidden_dropout=0.0,
                           attention_dropout=0.0, activation_dropout=0.0, positional_dropout=0.0,
                           speech_decoder_prenet_dropout=0.0, layerdrop=0.0, max_speech_positions=64,
                           max_text_positions=64)
    return Out(T.SpeechT5ForTextToSpeech(cfg), decoder_input_values=torch.randn(2, 6, 8)), _ids(), "train"


TORCHVISION = ["regnet", "mnasnet", "squeezenet", "googlenet", "inception_v3", "vgg11_bn", "alexnet",
               "efficientnet_v2", "maxvit", "swin_v2", "mobilenet_v2", "resnext", "wide_resnet", "mvit",
               "deeplabv3", "fcn", "lraspp", "ssdlite", "retinanet", "fcos", "maskrcnn"]
TRANSFORMERS = ["roberta", "xlm_roberta", "albert", "electra", "distilbert", "layoutlm", "bart", "pegasus", "marian",
                "mt5", "opt", "gpt_neox", "gptj", "falcon", "falcon_alibi", "mistral", "qwen2", "qwen2_moe", "phi",
                "phi3", "gemma", "gemma2", "stablelm", "starcoder2", "clip", "siglip", "blip", "segformer",
                "mobilevit", "convnextv2", "dinov2", "detr", "yolos", "longformer", "bigbird", "reformer", "rwkv",
                "hubert", "speecht5"]
BUILDERS = {name: globals()[name] for name in TORCHVISION + TRANSFORMERS}
EVAL = ["ssdlite", "retinanet", "fcos", "maskrcnn"]
# 4-D image inputs also run in channels_last (mvit's 5-D clips in channels_last_3d)
CHANNELS_LAST = {"regnet", "mnasnet", "squeezenet", "googlenet", "inception_v3", "vgg11_bn", "alexnet",
                 "efficientnet_v2", "maxvit", "mobilenet_v2", "resnext", "wide_resnet", "deeplabv3", "fcn", "lraspp",
                 "segformer", "mobilevit", "convnextv2", "mvit", "swin_v2"}
