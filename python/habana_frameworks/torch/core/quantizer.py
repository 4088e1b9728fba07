"""The bridge's PT2E quantizer (`habana_frameworks.torch.core.quantizer`).

`habana_quantizer` is a `torch.ao.quantization.quantizer.Quantizer`: with a global config
from `habana_quant_config_symmetric(dtype)` it annotates, in an exported graph, the
activation inputs, weights and (float) biases of conv2d and linear, both inputs of matmul and
the input of max_pool2d (whose output shares the input's quantization), as the bridge's does;
the config has no output spec, so outputs are quantized only where a consumer's input is. `prepare_pt2e` then inserts the
config's observers, and `convert_pt2e` replaces them with torch's reference
quantize/dequantize ops (quantized_decomposed), which run on hpu like any other op:

    from torch.ao.quantization.quantize_pt2e import prepare_pt2e, convert_pt2e
    from habana_frameworks.torch.core.quantizer import habana_quantizer, habana_quant_config_symmetric
    gm = torch.export.export(model, (x,)).module()
    q = habana_quantizer().set_global(habana_quant_config_symmetric(torch.float8_e4m3fn))
    gm = prepare_pt2e(gm, q); gm(x); gm = convert_pt2e(gm)

Activations and weights are per-tensor symmetric with the power-of-two hardware scales of
`core.observer.AbsMaxObserver` (eps 2**-12; a backoff margin of 2 for activations, 1 for
weights); the bias is left in floating point. fp8 limits are Gaudi2's (+-240 for both fp8
dtypes). torch.int8 is in the table of limits but, as in the bridge, its observer refuses it.
With PT_HPU_PT2EQ_KVCQ=1, KV-cache updates (full -> copy at prefill, index_copy at decode)
are annotated as well.
"""
from __future__ import annotations

import functools
import itertools
import os
from typing import Any

import torch
from torch.ao.quantization.observer import PlaceholderObserver
from torch.ao.quantization.quantizer import (
    QuantizationAnnotation,
    QuantizationSpec,
    Quantizer,
    SharedQuantizationSpec,
)
from torch.ao.quantization.quantizer.xnnpack_quantizer_utils import (
    OperatorConfig,
    QuantizationConfig,
    get_bias_qspec,
    get_input_act_qspec,
    get_output_act_qspec,
    get_weight_qspec,
)
from torch.fx import Node
from torch.fx.passes.utils.source_matcher_utils import get_source_partitions

from .observer import AbsMaxObserver

__all__ = ["habana_quantizer", "habana_quant_config_symmetric", "QUANTIZER_MIN_MAX"]

QUANTIZER_MIN_MAX = {torch.int8: (-128, 127), torch.float8_e4m3fn: (-240, 240), torch.float8_e5m2: (-240, 240)}
extra_args_act: dict[str, Any] = {"for_observer": {"eps": 2**-12, "backoff_margin": 2}}
extra_args_weight: dict[str, Any] = {"for_observer": {"eps": 2**-12, "backoff_margin": 1}}

_ANN = "quantization_annotation"


def _annotated(nodes) -> bool:
    return any(n is not None and _ANN in n.meta and n.meta[_ANN]._annotated for n in nodes)


def _mark_annotated(nodes) -> None:
    for n in nodes:
        if n is None:
            continue
        ann = n.meta.setdefault(_ANN, QuantizationAnnotation())
        ann._annotated = True


def _set_input_qspec(node: Node, inp: Node, qspec) -> None:
    ann = node.meta.setdefault(_ANN, QuantizationAnnotation())
    ann.input_qspec_map[inp] = qspec


def _user_in(nodes, inp: Node) -> Node:
    for n in nodes:
        if n in inp.users:
            return n
    raise ValueError("Could not find a user within source partition.")


def _set_output_qspec(node: Node, qspec) -> None:
    if not _annotated([node]):
        node.meta.setdefault(_ANN, QuantizationAnnotation()).output_qspec = qspec


def _kvcq_enabled() -> bool:
    try:
        from habana_frameworks.torch.internal import bridge_config as bc
        getter = getattr(bc, "get_pt_hpu_pt2eq_kvcq", None)
        if getter is not None:
            return bool(getter())
    except ImportError:
        pass
    return os.environ.get("PT_HPU_PT2EQ_KVCQ", "0").lower() in ("1", "true")


def _is(node: Any, name: str) -> bool:
    """node calls aten.<name>, e.g. name "full.default"."""
    return isinstance(node, Node) and node.op == "call_function" and str(node.target) == "aten." + name


class habana_quantizer(Quantizer):  # noqa: N801  (the bridge's name)
    """PT2E quantizer for hpu: see the module doc."""

    def __init__(self) -> None:
        super().__init__()
        self.global_config: QuantizationConfig | None = None
        self.operator_type_config: dict[str, QuantizationConfig | None] = {}

    def set_global(self, quantization_config: QuantizationConfig) -> "habana_quantizer":
        self.global_config = quantization_config
        return self

    def annotate(self, model: torch.fx.GraphModule) -> torch.fx.GraphModule:
        if self.global_config is None:
            return model
        return self.annotate_symmetric_config(model, self.global_config)

    def annotate_symmetric_config(self, model: torch.fx.GraphModule,
                                  config: QuantizationConfig) -> torch.fx.GraphModule:
        if _kvcq_enabled():
            self._annotate_kvcache(model, config)
        self._annotate_conv2d(model, config)
        self._annotate_linear(model, config)
        self._annotate_matmul(model, config)
        self._annotate_maxpool2d(model, config)
        return model

    def _annotate_kvcache(self, gm: torch.fx.GraphModule, config: QuantizationConfig) -> None:
        act = get_input_act_qspec(config)
        for node in gm.graph.nodes:
            if _is(node, "full.default") and len(node.users) == 1:
                user = next(iter(node.users))
                if _is(user, "copy.default") and isinstance(user.args[1], Node):
                    user.meta[_ANN] = QuantizationAnnotation(input_qspec_map={user.args[1]: act}, _annotated=True)
            if _is(node, "index_copy.default") and isinstance(node.args[3], Node):
                node.meta[_ANN] = QuantizationAnnotation(input_qspec_map={node.args[3]: act}, output_qspec=act,
                                                         _annotated=True)

    def _annotate_conv2d(self, gm: torch.fx.GraphModule, config: QuantizationConfig) -> None:
        parts = get_source_partitions(gm.graph, [torch.nn.Conv2d, torch.nn.functional.conv2d])
        for p in itertools.chain(*parts.values()):
            if len(p.output_nodes) > 1:
                raise ValueError("conv partition has more than one output node")
            conv = p.output_nodes[0]
            if conv.op != "call_function" or conv.target not in (torch.ops.aten.convolution.default,
                                                                  torch.ops.aten.conv2d.default):
                raise ValueError(f"{conv} is not an aten conv2d operator")
            if _annotated([conv]):
                continue
            qmap = {conv.args[0]: get_input_act_qspec(config), conv.args[1]: get_weight_qspec(config)}
            if len(conv.args) > 2 and isinstance(conv.args[2], Node):
                qmap[conv.args[2]] = get_bias_qspec(config)
            conv.meta[_ANN] = QuantizationAnnotation(input_qspec_map=qmap, output_qspec=get_output_act_qspec(config),
                                                     _annotated=True)

    def _annotate_linear(self, gm: torch.fx.GraphModule, config: QuantizationConfig) -> None:
        parts = get_source_partitions(gm.graph, [torch.nn.Linear, torch.nn.functional.linear])
        act, out, wq, bq = (get_input_act_qspec(config), get_output_act_qspec(config), get_weight_qspec(config),
                            get_bias_qspec(config))
        for p in itertools.chain(*parts.values()):
            weight = bias = None
            for n in p.params:
                try:  # a dotted target ("fc.weight") in graphs torch.export makes
                    t = functools.reduce(getattr, str(n.target).split("."), gm)
                except AttributeError:
                    continue
                if t.ndim == 2:
                    weight = n
                elif t.ndim == 1:
                    bias = n
            if weight is None:
                continue
            # The activation: the partition's input that is not one of its parameters (the
            # bridge takes input_nodes[0], which exported graphs may list after the weight).
            x = next((n for n in p.input_nodes if n not in p.params), p.input_nodes[0])
            _set_input_qspec(_user_in(p.nodes, x), x, act)
            _set_input_qspec(_user_in(p.nodes, weight), weight, wq)
            if bias is not None:
                _set_input_qspec(_user_in(p.nodes, bias), bias, bq)
            _set_output_qspec(p.output_nodes[0], out)
            _mark_annotated(p.nodes)

    def _annotate_matmul(self, gm: torch.fx.GraphModule, config: QuantizationConfig) -> None:
        parts = get_source_partitions(gm.graph, [torch.matmul])
        act, out = get_input_act_qspec(config), get_output_act_qspec(config)
        for p in itertools.chain(*parts.values()):
            if len(p.input_nodes) != 2 or len(p.output_nodes) != 1:
                continue  # e.g. x @ x: one input node
            for inp in p.input_nodes:
                _set_input_qspec(_user_in(p.nodes, inp), inp, act)
            _set_output_qspec(p.output_nodes[0], out)
            _mark_annotated(p.nodes)

    def _annotate_maxpool2d(self, gm: torch.fx.GraphModule, config: QuantizationConfig) -> None:
        parts = get_source_partitions(gm.graph, [torch.nn.MaxPool2d, torch.nn.functional.max_pool2d])
        for p in itertools.chain(*parts.values()):
            out = p.output_nodes[0]
            pool = next((n for n in p.nodes if n.target in (torch.ops.aten.max_pool2d_with_indices.default,
                                                            torch.ops.aten.max_pool2d.default)), None)
            if pool is None or _annotated([out, pool]):
                continue
            inp = pool.args[0]
            pool.meta[_ANN] = QuantizationAnnotation(input_qspec_map={inp: get_input_act_qspec(config)},
                                                     _annotated=True)
            shared = SharedQuantizationSpec((inp, pool))
            if out is pool:
                pool.meta[_ANN].output_qspec = shared
            else:
                out.meta[_ANN] = QuantizationAnnotation(output_qspec=shared, _annotated=True)

    def validate(self, model: torch.fx.GraphModule) -> None:
        pass

    @classmethod
    def get_supported_operators(cls) -> list[OperatorConfig]:
        return []


def habana_quant_config_symmetric(quant_dtype: torch.dtype) -> QuantizationConfig:
    """Per-tensor symmetric activations and weights of quant_dtype (AbsMaxObserver), bias in
    float, as the bridge's config."""
    quant_min, quant_max = QUANTIZER_MIN_MAX[quant_dtype]
    act = QuantizationSpec(dtype=quant_dtype, quant_min=quant_min, quant_max=quant_max,
                           qscheme=torch.per_tensor_symmetric, is_dynamic=False,
                           observer_or_fake_quant_ctr=AbsMaxObserver.with_args(**extra_args_act["for_observer"]))
    weight = QuantizationSpec(dtype=quant_dtype, quant_min=quant_min, quant_max=quant_max,
                              qscheme=torch.per_tensor_symmetric, ch_axis=0, is_dynamic=False,
                              observer_or_fake_quant_ctr=AbsMaxObserver.with_args(**extra_args_weight["for_observer"]))
    bias = QuantizationSpec(dtype=torch.float, observer_or_fake_quant_ctr=PlaceholderObserver)
    return QuantizationConfig(act, None, weight, bias)
