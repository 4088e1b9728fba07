"""PT_HPU_GPU_MIGRATION=1: unmodified CUDA code trains on the HPU (subprocesses: the
mapping patches torch for the whole process)."""
import os
import subprocess
import sys

CUDA_SCRIPT = """
import torch
assert torch.cuda.is_available() and torch.cuda.device_count() == 1
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(64, 8).cuda()
y = torch.randn(64, 1).to(device="cuda")
for _ in range(5):
    with torch.cuda.amp.autocast(enabled=MIXED):
        loss = torch.nn.functional.mse_loss(model(x).float(), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
torch.cuda.synchronize()
print(next(model.parameters()).device.type, x.device.type, x.is_cuda, round(loss.item(), 5),
      torch.zeros(1, device=torch.device("cuda", 0)).device.type, torch.cuda.memory_allocated() > 0)
"""


def _run(code, migrate):
    env = dict(os.environ, PT_HPU_GPU_MIGRATION="1" if migrate else "0")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=180)


def test_cuda_script_trains_on_hpu_like_cpu():
    r = _run("MIXED = False\n" + CUDA_SCRIPT, True)
    assert r.returncode == 0, r.stderr
    dev, xdev, is_cuda, loss, zdev, mem = r.stdout.split()
    assert (dev, xdev, is_cuda, zdev, mem) == ("hpu", "hpu", "True", "hpu", "True")
    # The same script on CPU (cuda calls replaced by hand) gives the same loss.
    cpu = (CUDA_SCRIPT.replace(".cuda()", "").replace('device="cuda"', 'device="cpu"')
           .replace('.to(device="cuda")', "").replace("torch.cuda.amp.autocast(enabled=MIXED)", "torch.autocast('cpu', enabled=False)")
           .replace("torch.cuda.synchronize()", "").replace('torch.device("cuda", 0)', '"cpu"')
           .replace("assert torch.cuda.is_available() and torch.cuda.device_count() == 1", "")
           .replace("torch.cuda.memory_allocated() > 0", "True"))
    rc = _run("MIXED = False\n" + cpu, False)
    assert rc.returncode == 0, rc.stderr
    assert abs(float(loss) - float(rc.stdout.split()[3])) < 1e-4


def test_cuda_autocast_becomes_hpu_bf16():
    code = ("import torch\nm = torch.nn.Linear(4, 2).cuda()\nx = torch.randn(3, 4).cuda()\n"
            "with torch.cuda.amp.autocast():\n    a = m(x)\n"
            "with torch.autocast('cuda', dtype=torch.float16):\n    b = m(x)\n"
            "print(a.dtype, a.device.type, b.dtype, torch.cuda.get_device_name())")
    r = _run(code, True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["torch.bfloat16", "hpu", "torch.bfloat16", "GAUDI2"]


def test_without_migration_cuda_stays_cuda():
    r = _run("import torch, habana_frameworks.torch\nprint(torch.cuda.is_available())", False)
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stderr
