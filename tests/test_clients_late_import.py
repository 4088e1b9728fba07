"""`import habana_frameworks.torch` after a backward pass already ran in the process (notebooks,
Lightning, TORCH_DEVICE_BACKEND_AUTOLOAD=0): hpu training then works on the importing thread
and on other threads (where torch's autograd engine uses its per-device worker queues, which
it had sized before hpu existed), in eager and lazy mode. Each case runs in a fresh process."""
import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import os, threading
    import torch

    # A CPU backward first: the autograd engine starts its device threads without hpu.
    w = torch.randn(4, 3, requires_grad=True)
    (w * 2).sum().backward()
    assert "habana_frameworks.torch" not in __import__("sys").modules

    import habana_frameworks.torch.core as htcore

    def step(device):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 2)).to(device)
        x = torch.randn(6, 5).to(device)
        loss = model(x).pow(2).mean()
        loss.backward()
        htcore.mark_step()
        return [loss.detach().cpu()] + [p.grad.cpu() for p in model.parameters()]

    def same(a, b):
        return all(torch.allclose(u, v, rtol=1e-5, atol=1e-6) for u, v in zip(a, b))

    ref = step("cpu")
    assert same(step("hpu"), ref), "importing thread"
    out = {}
    def other():
        try:
            out["grads"] = step("hpu")
        except BaseException as e:  # reported by the main thread
            out["error"] = repr(e)
    t = threading.Thread(target=other)
    t.start()
    t.join(60)
    assert not t.is_alive(), "backward on another thread hung"
    assert "error" not in out, out.get("error")
    assert same(out["grads"], ref), "other thread"
    if os.environ.get("FORK_CHECK") == "1":
        pid = os.fork()
        if pid == 0:
            # The forking thread's own backward still runs in the child.
            os._exit(0 if same(step("hpu"), ref) else 3)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, status
    print("LATE IMPORT OK", flush=True)
""")


@pytest.mark.parametrize("lazy,fork", [(False, True), (True, False)], ids=["eager", "lazy"])
def test_import_after_backward(lazy, fork):
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0", PT_HPU_LAZY_MODE="1" if lazy else "0",
               FORK_CHECK="1" if fork else "0")
    p = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and "LATE IMPORT OK" in p.stdout, p.stdout[-2000:] + p.stderr[-4000:]
