"""The session-19 model families (tests/families_s19.py) compiled as Gaudi 1.21+ scripts write
it (issue 16, items 3 and 6): `torch.compile(model, backend="hpu_backend")`, forward + loss +
backward + clip_grad_norm_ + AdamW eagerly, then an inference call under `torch.no_grad()`,
judged against float64 on the CPU with the eager families' rule (hpu within 8x CPU float32's
distance, or 3e-6 of the largest value), in the default layout and channels_last, with no CPU
fallback (dynamo's graph breaks are allowed: tests/compile_families_s20.py prints them); and
greedy `generate()` of causal LMs whose forward is compiled gives CPU's tokens.

The default run keeps a cheap representative subset; HPUSIM_FAMILIES_ALL=1 runs every family
(the hand sweep: `python tests/compile_families_s20.py FAMILY...`). One case runs under
PT_HPU_LAZY_MODE=1 in a subprocess (torch.compile in lazy mode runs the aten graphs as lazy ops)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from habana_frameworks.torch.utils.internal import is_lazy

pytest.importorskip("torchvision")
pytest.importorskip("transformers")
import compile_families_s20 as cf  # noqa: E402

pytestmark = pytest.mark.skipif(is_lazy(), reason="eager-mode sweep; lazy mode: test_compiled_family_in_lazy_mode")

TRAIN = ["squeezenet", "albert", "qwen2"]
CL = ["mobilenet_v2"]
GENERATE = ["opt"]
if os.environ.get("HPUSIM_FAMILIES_ALL") == "1":
    TRAIN = [f for f in cf.fam.BUILDERS if f not in cf.fam.EVAL]
    CL = sorted(cf.fam.CHANNELS_LAST)
    GENERATE = list(cf.LM_GENERATE)


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


# Families the full sweep (HPUSIM_FAMILIES_ALL=1) knows to fail, with the reason.
KNOWN = {
    # Same distance with backend="aot_eager" on the CPU (1.23e-3 of the largest gradient from
    # float64, CPU eager 2.6e-7): dynamo/AOT's, not hpu_backend's.
    "bigbird": pytest.mark.skip(reason="compiled gradients are as far from float64 with aot_eager on CPU"),
}
CASES = [pytest.param(f, None, marks=KNOWN.get(f, ()), id=f) for f in TRAIN] + [
    pytest.param(f, torch.channels_last_3d if f == "mvit" else torch.channels_last,
                 id=f + "-" + ("channels_last_3d" if f == "mvit" else "channels_last")) for f in CL]


@pytest.mark.parametrize("family,layout", CASES)
def test_family_trains_compiled(family, layout):
    cf.train_case(family, layout)


# Inputs and compile options users vary (the hand sweep's --strided, --transposed, --cl-input,
# --dynamic, --mark-dynamic, --resize, --reduce-overhead): full sweep only, the default run
# covers them on small models in tests/test_compile_families_s22.py.
# Not here: longformer with dynamic=True fails inside torch (default_partition's assertion
# 'all(user.target == operator.getitem ...)', the same with backend="aot_eager_default_partitioner"
# on the CPU; aot_eager's min-cut partitioner fails on a symbolic value-range assertion).
VARIANTS = {
    "strided": dict(feed=cf.strided),
    "transposed": dict(feed=cf.transposed),
    "cl_input": dict(feed=cf.channels_last_input),
    "dynamic": dict(compile_kw=dict(dynamic=True), resize=cf.shorter),
    "mark_dynamic": dict(feed=cf.dynamic_dim, resize=cf.shorter),
    "resize": dict(resize=cf.shorter),
    "reduce_overhead": dict(compile_kw=dict(mode="reduce-overhead")),
}
VARIANT_FAMILIES = {"squeezenet": list(VARIANTS), "resnext": ["transposed", "cl_input"],
                    "albert": [v for v in VARIANTS if v != "cl_input"], "qwen2": ["strided", "dynamic", "mark_dynamic"],
                    "mobilenet_v2": ["strided", "resize"]}
VARIANT_CASES = []
if os.environ.get("HPUSIM_FAMILIES_ALL") == "1":
    VARIANT_CASES = [pytest.param(f, v, id=f"{f}-{v}") for f, vs in VARIANT_FAMILIES.items() for v in vs]
GENERATE_DYNAMIC = ["qwen2", "gpt_neox", "falcon"] if os.environ.get("HPUSIM_FAMILIES_ALL") == "1" else []


@pytest.mark.parametrize("family,variant", VARIANT_CASES)
def test_family_variant_trains_compiled(family, variant):
    cf.train_case(family, **VARIANTS[variant])


@pytest.mark.parametrize("family", GENERATE_DYNAMIC)
def test_compiled_lm_generates_cpu_tokens_dynamic(family):
    cf.generate_case(family, compile_kw=dict(dynamic=True))


@pytest.mark.parametrize("family", GENERATE)
def test_compiled_lm_generates_cpu_tokens(family):
    cf.generate_case(family)


def test_compiled_family_in_lazy_mode():
    env = dict(os.environ, PT_HPU_LAZY_MODE="1")
    code = ("import sys; sys.path.insert(0, %r); import compile_families_s20 as cf; "
            "from habana_frameworks.torch.utils.internal import is_lazy; assert is_lazy(); "
            "cf.train_case('squeezenet'); print('ok')") % os.path.dirname(os.path.abspath(__file__))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout[-2000:] + r.stderr[-4000:]
