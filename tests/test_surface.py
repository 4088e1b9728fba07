"""The bridge's import surface that clients use: utils.debug, utils.experimental,
internal.bridge_config, torch.hpu switches, habana_dataloader and mediapipe."""
import csv
import os
import subprocess
import sys

import pytest
import torch

import habana_frameworks.torch.core as htcore  # noqa: F401
import habana_frameworks.torch.utils.debug as htdebug
import habana_frameworks.torch.utils.experimental as htexp
from habana_frameworks.torch.internal import bridge_config


def _run(code, **env):
    e = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e, timeout=180)


# --- utils.debug -----------------------------------------------------------------------------

def test_fallback_op_count_follows_real_fallbacks(fallback_counter):
    before = htdebug._get_fallback_op_count()
    x = torch.arange(6.0).reshape(2, 3).to("hpu")
    torch.linalg.matrix_rank(x)  # not lowered: runs on the CPU fallback
    after = htdebug._get_fallback_op_count()
    grew = {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}
    assert grew and grew == fallback_counter()
    assert all(isinstance(v, int) and v > 0 for v in after.values())


def test_get_tensor_info():
    x = torch.zeros(4, 5, device="hpu")
    ptr, nbytes = htdebug.get_tensor_info(x[1:])
    assert ptr == x.data_ptr() and nbytes == 4 * 5 * 4
    assert htdebug.get_tensor_info(torch.zeros(3)) is None
    assert htdebug.get_tensor_info("not a tensor") is None


def test_memstat_helpers_write_device_figures(tmp_path, monkeypatch):
    log = tmp_path / "mem.log"
    monkeypatch.setenv("PT_HABANA_MEM_LOG_FILENAME", str(log))
    htdebug._memstat_devmem_start_collect("window")
    keep = torch.empty(1 << 20, dtype=torch.uint8, device="hpu")
    htdebug._memstat_devmem_stop_collect("window")
    htdebug._memstat_livealloc("live")
    text = log.read_text()
    assert "devmem start collect: window" in text and "livealloc: live" in text
    in_use = [int(line.split(":")[1]) for line in text.splitlines() if line.strip().startswith("InUse:")]
    assert in_use[-1] == torch.hpu.memory_allocated() and in_use[-1] >= keep.numel()
    delta = [int(line.split(":")[1]) for line in text.splitlines() if "DeltaInUse" in line]
    assert delta and delta[0] >= 1 << 20


def test_graph_pass_toggles_read_back():
    assert htdebug._is_enabled_weight_permute_pass()
    htdebug._enable_permute_pass(False)
    try:
        assert not htdebug._is_enabled_weight_permute_pass()
    finally:
        htdebug._enable_permute_pass(True)
    assert htdebug._is_enabled_synapse_layout_handling()
    assert htdebug._get_jit_cache_size() >= 0


# --- utils.experimental ----------------------------------------------------------------------

def test_device_type_follows_configured_generation():
    assert htexp._get_device_type() == htexp.synDeviceType.synDeviceGaudi2
    assert str(htexp._get_device_type()) == "synDeviceType.synDeviceGaudi2"
    assert htexp._is_fp16_supported()
    assert htexp.hpu.is_available() and htexp.hpu.device_count() == 1
    r = _run("import habana_frameworks.torch.utils.experimental as e; "
             "print(e._get_device_type() == e.synDeviceType.synDeviceGaudi, e._is_fp16_supported())",
             HPUSIM_DEVICE_TYPE="GAUDI")
    assert r.stdout.split() == ["True", "False"], r.stderr


def test_data_ptr():
    x = torch.arange(10.0, device="hpu")
    assert htexp._data_ptr(x[3:]) == x.data_ptr() + 12
    with pytest.raises(TypeError):
        htexp._data_ptr(3)


def _detect(tmp_path, lazy):
    code = f"""
import torch, habana_frameworks.torch.core as htcore
from habana_frameworks.torch.utils.experimental import detect_recompilation_auto_model
torch.manual_seed(0)
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fixed = torch.nn.Linear(4, 4)
        self.tail = torch.nn.Linear(4, 2)
    def forward(self, x):
        x = self.fixed(x)
        x = x[x[:, 0] > 0]
        return self.tail(x)
net = detect_recompilation_auto_model(Net().to('hpu'), waittime=0, csv_out={str(tmp_path / 'out.csv')!r})
for i in range(6):
    net(torch.randn(16, 4).to('hpu')).sum().item()
    htcore.mark_step()
net.analyse_dynamicity()
"""
    r = _run(code, PT_HPU_LAZY_MODE="1" if lazy else "0")
    assert r.returncode == 0, r.stderr
    with open(tmp_path / "out.csv_2.csv", newline="") as f:
        rows = {row["Module name"]: row for row in csv.DictReader(f)}
    return rows


@pytest.mark.parametrize("lazy", [False, True], ids=["eager", "lazy"])
def test_detect_recompilation(tmp_path, lazy):
    rows = _detect(tmp_path, lazy)
    assert int(rows["fixed"]["Total call count"]) == 6
    # fixed always sees (16, 4): compiled on the first call only.
    assert int(rows["fixed"]["Recompile count"]) == 1
    # tail sees a data-dependent number of rows: it recompiles for each new one.
    assert int(rows["tail"]["Recompile count"]) >= 2


# --- internal.bridge_config ------------------------------------------------------------------

def test_bridge_config_get_set_and_env_setting(monkeypatch):
    monkeypatch.delenv("PT_COMPILE_ONLY_MODE", raising=False)
    assert bridge_config.get_pt_compile_only_mode() is False
    with bridge_config.env_setting("PT_COMPILE_ONLY_MODE", True):
        assert bridge_config.get_pt_compile_only_mode() is True
    assert bridge_config.get_pt_compile_only_mode() is False
    bridge_config.set_pt_compile_only_mode(True)
    assert os.environ["PT_COMPILE_ONLY_MODE"] == "1"
    # The bridge does not restore a flag when the block raises.
    with pytest.raises(ZeroDivisionError):
        with bridge_config.env_setting("PT_COMPILE_ONLY_MODE", False):
            1 / 0
    assert bridge_config.get_pt_compile_only_mode() is False


def test_bridge_config_unknown_and_read_once_flags():
    with pytest.raises(KeyError):
        with bridge_config.env_setting("PT_NO_SUCH_FLAG", 1):
            pass
    with pytest.raises(KeyError):
        bridge_config.get("PT_NO_SUCH_FLAG")
    assert bridge_config.get_pt_hpu_lazy_mode() in (0, 1)
    assert not hasattr(bridge_config, "set_pt_hpu_lazy_mode")
    with pytest.raises(RuntimeError, match="cannot be changed at run time"):
        bridge_config.set("PT_HPU_LAZY_MODE", 1)
    with pytest.raises(ValueError):
        bridge_config.set("PT_COMPILE_ONLY_MODE", "maybe")


# --- torch.hpu switches ----------------------------------------------------------------------

def test_dynamic_shape_switches(monkeypatch):
    monkeypatch.delenv("PT_HPU_ENABLE_REFINE_DYNAMIC_SHAPES", raising=False)
    assert torch.hpu.get_dynamic_shape_status() is False
    torch.hpu.enable_dynamic_shape()
    assert torch.hpu.get_dynamic_shape_status() is True
    torch.hpu.disable_dynamic_shape()
    assert torch.hpu.get_dynamic_shape_status() is False


def test_sdp_kernel_recompute_state():
    assert torch.hpu.recompute_sdp_enabled() is False
    with torch.hpu.sdp_kernel(enable_recompute=True):
        assert torch.hpu.recompute_sdp_enabled() is True
        with torch.hpu.sdp_kernel(enable_recompute=False):
            assert torch.hpu.recompute_sdp_enabled() is False
        assert torch.hpu.recompute_sdp_enabled() is True
    assert torch.hpu.recompute_sdp_enabled() is False


# --- habana_dataloader, mediapipe ------------------------------------------------------------

def test_habana_dataloader_falls_back_to_torch(capsys):
    import habana_dataloader
    ds = torch.utils.data.TensorDataset(torch.arange(10.0), torch.arange(10))
    dl = habana_dataloader.HabanaDataLoader(ds, batch_size=4, drop_last=True)
    out = capsys.readouterr().out
    assert "Failed to initialize Habana Dataloader, error: " in out
    assert "Running with PyTorch Dataloader" in out
    assert isinstance(dl.dataloader, torch.utils.data.DataLoader)
    assert len(dl) == 2 and dl.batch_size == 4
    batches = [b for b in dl]
    assert [b[0].tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert [b[0].tolist() for b in dl] == [[0, 1, 2, 3], [4, 5, 6, 7]]  # iterates again


def test_habana_dataloader_image_folder_reports_device(tmp_path, capsys):
    torchvision = pytest.importorskip("torchvision")
    import habana_dataloader
    from PIL import Image
    for cls in ("a", "b"):
        (tmp_path / cls).mkdir()
        Image.new("RGB", (4, 4)).save(tmp_path / cls / "x.png")
    ds = torchvision.datasets.ImageFolder(str(tmp_path), transform=torchvision.transforms.ToTensor())
    dl = habana_dataloader.HabanaDataLoader(ds, batch_size=2)
    out = capsys.readouterr().out
    assert "HabanaDataLoader device type synDeviceType.synDeviceGaudi2" in out
    assert "error: Unsupported device\nRunning with PyTorch Dataloader" in out
    images, labels = next(iter(dl))
    assert images.shape == (2, 3, 4, 4) and labels.tolist() == [0, 1]


def test_habana_dataloader_fallback_disabled(monkeypatch):
    import habana_dataloader
    monkeypatch.setenv("DATALOADER_FALLBACK_EN", "")
    with pytest.raises(TypeError):
        habana_dataloader.HabanaDataLoader(torch.utils.data.TensorDataset(torch.zeros(2)))


def test_mediapipe_surface_imports_and_refuses_to_build():
    from habana_frameworks.mediapipe import MediaPipeUnavailable, fn  # noqa: F401
    from habana_frameworks.mediapipe.media_types import decoderStage, dtype, ftype, imgtype, randomCropType  # noqa: F401
    from habana_frameworks.mediapipe.mediapipe import MediaPipe
    from habana_frameworks.mediapipe.operators.cpu_nodes.cpu_nodes import media_function
    from habana_frameworks.mediapipe.plugins.iterator_pytorch import HPUResnetPytorchIterator

    class Pipe(MediaPipe):
        def __init__(self):
            super().__init__(device="legacy", batch_size=2, pipe_name="Pipe:1")

    with pytest.raises(MediaPipeUnavailable, match="hardware media decoder"):
        Pipe()
    with pytest.raises(MediaPipeUnavailable):
        fn.ImageDecoder(output_format=imgtype.RGB_P)
    with pytest.raises(MediaPipeUnavailable):
        HPUResnetPytorchIterator(mediapipe=None)
    assert media_function({"shape": [2]}).params == {"shape": [2]}


def test_replay_of_an_uncaptured_hpu_graph_only_flushes():
    # The bridge's HPUGraph.replay is a step marker followed by the captured parts: with none
    # captured yet it only runs the pending lazy work (lightning-habana replays before it
    # captures in its sanity-check validation).
    code = """
import torch, habana_frameworks.torch as ht
g = ht.hpu.HPUGraph()
x = torch.ones(4, device='hpu')
y = x * 3
g.replay()
print('Y', y.cpu().tolist())
with ht.hpu.stream(ht.hpu.Stream()):
    g.capture_begin(); z = x + 1; g.capture_end()
x.fill_(5.0)
g.replay()
print('Z', z.cpu().tolist())
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, PT_HPU_LAZY_MODE="1"))
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Y [3.0, 3.0, 3.0, 3.0]" in r.stdout and "Z [6.0, 6.0, 6.0, 6.0]" in r.stdout, r.stdout


def test_memory_usage_follows_allocations():
    # torch.hpu.memory_usage(device): the bridge's "memory used, as given by hl-smi" (InUse).
    base = torch.hpu.memory_usage()
    assert base == torch.hpu.memory_stats()["InUse"] == torch.hpu.memory_usage(0)
    t = torch.empty(1 << 20, dtype=torch.uint8, device="hpu")
    assert torch.hpu.memory_usage("hpu:0") >= base + (1 << 20)
    del t
    assert torch.hpu.memory_usage() == base
    with pytest.raises(AssertionError, match="Invalid device id"):
        torch.hpu.memory_usage(7)
