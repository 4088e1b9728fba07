"""Habana Model-References' PyTorch hello world runs on hpusim in every mode its README lists:
mnist.py in FP32 and BF16 (autocast), eager and torch.compile(backend="hpu_backend"), on one
process and over 2 processes with the hccl backend (DDP, as mpirun/torchrun launch it), and
example.py in lazy mode; mnist.py also in lazy mode. The scripts' calls are reproduced by
tests/clients_hello_world_worker.py on locally written MNIST-format files.

Checks: the loss falls and the test accuracy is high; with dropout disabled (the only random
part) fp32 runs match the same script on the CPU step by step, and the 2-process DDP run
matches a one-process CPU computation of the same sharded, gradient-averaged steps."""
import json
import os
import socket
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "clients_hello_world_worker.py")
sys.path.insert(0, HERE)
from clients_mnist_data import write_mnist  # noqa: E402

pytest.importorskip("torchvision")


@pytest.fixture(scope="module")
def data_path(tmp_path_factory) -> str:
    return write_mnist(str(tmp_path_factory.mktemp("hello_world_data")))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(specs: list, data: str, lazy: bool, world: int = 1, cwd: str = None) -> list:
    specs = [f"{s} --data-path {data}" for s in specs]
    port = str(_free_port())
    procs = []
    for rank in range(world):
        env = dict(os.environ, PT_HPU_LAZY_MODE="1" if lazy else "0")
        if world > 1:
            env.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                       MASTER_PORT=port, HPUSIM_DEVICE_COUNT=str(world))
        procs.append(subprocess.Popen([sys.executable, WORKER, *specs], env=env, cwd=cwd or data,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    results = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        lines = [ln for ln in out.splitlines() if ln.startswith("RESULT ")]
        assert p.returncode == 0 and lines, out[-2000:] + err[-6000:]
        runs = json.loads(lines[-1][len("RESULT "):])
        assert [r["spec"] for r in runs] == specs
        assert all(r["lazy"] == lazy for r in runs)
        results.append(runs)
    return results


def _learns(run: dict) -> None:
    epoch = run["epochs"][-1]
    losses = run["epochs"][0]["losses"]
    assert all(0.0 <= x < 10.0 for x in losses), losses
    # Falls from ln(10) ~ 2.3 at the start to about a third of it by the last steps.
    assert sum(losses[-3:]) / 3 < 0.6 * sum(losses[:2]) / 2, losses
    assert epoch["acc"] >= 90.0 and epoch["test_loss"] < 0.7, epoch
    assert run["param_device"] == "hpu:0"


def _close(a: list, b: list, rtol: float = 2e-4, atol: float = 2e-5) -> bool:
    return len(a) == len(b) and all(abs(x - y) <= atol + rtol * abs(y) for x, y in zip(a, b))


def _same_as_cpu(run: dict, cpu: dict) -> None:
    for e_hpu, e_cpu in zip(run["epochs"], cpu["epochs"]):
        assert _close(e_hpu["losses"], e_cpu["losses"]), (e_hpu["losses"], e_cpu["losses"])
        assert _close([e_hpu["test_loss"]], [e_cpu["test_loss"]]) and e_hpu["acc"] == e_cpu["acc"]
    for name, values in cpu["params"].items():
        assert _close(run["params"][name], values, rtol=1e-3, atol=1e-4), name


def test_mnist_single_process_eager_and_compile(data_path):
    """The README's four 1-HPU commands (FP32/BF16 x eager/torch.compile), and FP32 against CPU."""
    (runs,) = _launch(["--hpu", "--hpu --autocast", "--hpu --use-torch-compile", "--hpu --autocast --use-torch-compile",
                       "--hpu --dropout 0", "--hpu --use-torch-compile --dropout 0", "--dropout 0"],
                      data_path, lazy=False)
    fp32, bf16, compiled, compiled_bf16, det, det_compiled, cpu = runs
    for run in (fp32, bf16, compiled, compiled_bf16):
        _learns(run)
    # autocast really ran the matmuls in bf16: the losses differ from the fp32 run's.
    assert not _close(bf16["epochs"][0]["losses"], fp32["epochs"][0]["losses"], rtol=1e-4, atol=0)
    _same_as_cpu(det, cpu)
    _same_as_cpu(det_compiled, cpu)


def test_mnist_and_example_lazy(data_path):
    """Lazy mode: example.py (the README's lazy command) and mnist.py FP32/BF16, against CPU."""
    (runs,) = _launch(["--hpu", "--hpu --autocast", "--hpu --dropout 0", "--dropout 0",
                       "--script example --hpu --epochs 6", "--script example --epochs 6"], data_path, lazy=True)
    fp32, bf16, det, cpu, example, example_cpu = runs
    _learns(fp32)
    _learns(bf16)
    _same_as_cpu(det, cpu)
    # example.py: SGD with momentum on the MLP, mark_step in the test loop, checkpoints
    # written from a CPU copy of the hpu weights.
    epochs = example["epochs"]
    assert epochs[-1]["train_loss"] < epochs[0]["train_loss"] and epochs[-1]["test_acc"] > epochs[0]["test_acc"]
    assert all(e["ckpt_equal"] for e in epochs)
    for e, c in zip(epochs, example_cpu["epochs"]):
        assert _close([e["train_loss"], e["test_loss"]], [c["train_loss"], c["test_loss"]]), (e, c)
        assert (e["train_acc"], e["test_acc"]) == (c["train_acc"], c["test_acc"])


def test_mnist_two_processes_hccl(data_path):
    """The README's multi-card commands with 2 processes: hccl process group, DDP, eager FP32
    (checked against the CPU) and BF16 with torch.compile."""
    ranks = _launch(["--hpu --dropout 0 --cpu-ddp-reference --batch-size 32",
                     "--hpu --autocast --use-torch-compile --batch-size 32"], data_path, lazy=False, world=2)
    assert [[r["rank"] for r in runs] for runs in ranks] == [[0, 0], [1, 1]]
    (det0, bf16_0), (det1, bf16_1) = ranks
    ref = det0["cpu_ddp_reference"]
    for rank, run in enumerate((det0, det1)):
        assert run["world"] == 2 and run["param_device"] == "hpu:0"
        # Each rank's loss on its shard, step by step, as the CPU computes it.
        assert _close(run["epochs"][0]["losses"], ref["epochs"][0][rank]), (run["epochs"][0]["losses"], ref)
        for name, values in ref["params"].items():
            assert _close(run["params"][name], values, rtol=1e-3, atol=1e-4), name
        # The all_reduce of [count, correct] over hccl: both ranks see the whole test set.
        assert run["epochs"][0]["count"] == 256 and run["epochs"][0]["acc"] == det0["epochs"][0]["acc"]
    for run in (bf16_0, bf16_1):
        _learns(run)
    # DDP keeps the replicas identical.
    assert bf16_0["params"] == bf16_1["params"] and det0["params"] == det1["params"]
