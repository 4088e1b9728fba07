"""Habana Model-References' PyTorch hello world (PyTorch/examples/computer_vision/hello_world:
`mnist.py` + `utils.py`, and `example.py`) as a client of hpusim. Used by
tests/test_clients_hello_world.py, one process per execution mode (the bridge fixes eager or
lazy when it loads); the 2-process runs are launched with the environment torchrun sets.

Written here from the scripts' behaviour, not copied: the same module imports
(`habana_frameworks.torch.core`, `habana_frameworks.torch.utils.debug`,
`habana_frameworks.torch.distributed.hccl`), `torch._dynamo.config.optimize_ddp = False`, the
same Net (two convs, two dropouts, 7744->128->10, `torch.autocast("hpu", bfloat16)` in
forward with `--autocast`), `torch.compile(model, backend="hpu_backend")` inside train() and
test() with `--use-torch-compile`, Adadelta + StepLR, `init_process_group("hccl")`,
DistributedSampler, `DataLoader(pin_memory=True, drop_last=True)`, DDP with
`bucket_cap_mb=100, broadcast_buffers=False, gradient_as_bucket_view=True`, the CPU-side
top-k accuracy and the hpu all_reduce of the test metrics. example.py (lazy mode in its README):
an MLP with SGD(momentum, weight decay), MultiStepLR, `htcore.mark_step()` in the test loop
and a CPU copy of the state dict saved with torch.save.

Data: MNIST-format files the test writes first (tests/clients_mnist_data.py); download=True
finds them present. Differences from the originals, none of which changes a bridge call: smaller
data, `--dropout 0` to compare bit-for-bit-ish with a CPU run (dropout draws from the device
generator, which is not CPU's), the DataLoader worker count, and no print suppression on
non-zero ranks. Prints `RESULT <json>`."""
import argparse
import json
import os
import sys
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.lr_scheduler import MultiStepLR, StepLR
from torchvision import datasets, transforms

import habana_frameworks.torch.core as htcore
import habana_frameworks.torch.utils.debug as htdebug  # noqa: F401  (mnist.py imports it unused)

torch._dynamo.config.optimize_ddp = False


class Net(nn.Module):
    def __init__(self, use_autocast: bool = False, dropout: float = 1.0):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25 * dropout)
        self.dropout2 = nn.Dropout(0.5 * dropout)
        self.fc1 = nn.Linear(7744, 128)
        self.fc2 = nn.Linear(128, 10)
        self._use_autocast = use_autocast

    def forward(self, x):
        with torch.autocast("hpu", dtype=torch.bfloat16, enabled=self._use_autocast):
            x = F.relu(self.conv1(x))
            x = F.relu(self.conv2(x))
            x = F.max_pool2d(x, 3, 2)
            x = self.dropout1(x)
            x = torch.flatten(x, 1)
            x = F.relu(self.fc1(x))
            x = self.dropout2(x)
            x = self.fc2(x)
            return F.log_softmax(x, dim=1)


def accuracy(output, target, topk=(1,)):
    # utils.accuracy: top-k on the device, the comparison on the host.
    with torch.no_grad():
        maxk = max(topk)
        _, pred = output.topk(maxk, 1, True, True)
        pred_cpu = pred.t().clone().detach().to("cpu")
        target_cpu = target.clone().detach().to("cpu")
        correct = pred_cpu.eq(target_cpu[None])
        return [correct[:k].flatten().sum(dtype=torch.float32) * (100.0 / target.size(0)) for k in topk]


def train(args, model, device, loader, optimizer) -> list:
    model.train()
    if args.use_torch_compile:
        model = torch.compile(model, backend="hpu_backend")
    losses = []
    for step, (data, target) in enumerate(loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        loss = F.nll_loss(model(data), target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if args.max_training_step and step + 1 == args.max_training_step:
            break
    return losses


def test(args, model, device, loader, world: int) -> dict:
    model.eval()
    if args.use_torch_compile:
        model = torch.compile(model, backend="hpu_backend")
    test_loss, acc_sum, count = 0.0, 0.0, 0
    with torch.no_grad():
        for data, target in loader:
            n = data.shape[0]
            data, target = data.to(device), target.to(device)
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction="sum").item()
            acc1, _ = accuracy(output, target, topk=(1, 5))
            acc_sum += acc1.item() * n
            count += n
    test_loss /= len(loader.dataset) / world
    # MetricLogger.synchronize_between_processes: [count, total] as float32 on the hpu.
    acc = torch.tensor([count, acc_sum], dtype=torch.float32).to(device)
    if world > 1:
        torch.distributed.all_reduce(acc)
    acc = acc.tolist()
    return {"test_loss": test_loss, "acc": acc[1] / acc[0], "count": int(acc[0])}


def init_distributed(args) -> tuple:
    # utils.init_distributed_mode with the launcher's environment (torchrun / mpirun -x).
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        return 0, 1
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if args.hpu:
        import habana_frameworks.torch.distributed.hccl  # noqa: F401

        torch.distributed.init_process_group("hccl", rank=rank, world_size=world)
    return rank, world


def loaders(args, rank: int, world: int):
    transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])
    if world > 1 and rank != 0:
        torch.distributed.barrier()  # rank 0 "downloads" first
    train_set = datasets.MNIST(args.data_path, train=True, download=True, transform=transform)
    test_set = datasets.MNIST(args.data_path, train=False, transform=transform)
    if world > 1:
        if rank == 0:
            torch.distributed.barrier()
        train_sampler = torch.utils.data.distributed.DistributedSampler(train_set)
        test_sampler = torch.utils.data.distributed.DistributedSampler(test_set)
        common = dict(batch_size=args.batch_size, num_workers=args.workers, pin_memory=True, drop_last=True)
        return (torch.utils.data.DataLoader(train_set, sampler=train_sampler, **common),
                torch.utils.data.DataLoader(test_set, sampler=test_sampler, **common), train_sampler)
    return (torch.utils.data.DataLoader(train_set, batch_size=args.batch_size),
            torch.utils.data.DataLoader(test_set, batch_size=args.test_batch_size), None)


def run_mnist(args, rank: int, world: int) -> dict:
    device = torch.device("hpu" if args.hpu else "cpu")
    torch.manual_seed(args.seed)
    train_loader, test_loader, train_sampler = loaders(args, rank, world)
    model = Net(use_autocast=args.autocast, dropout=args.dropout).to(device)
    optimizer = optim.Adadelta(model.parameters(), lr=args.lr)
    if world > 1 and args.hpu:
        model = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=100, broadcast_buffers=False,
                                                          gradient_as_bucket_view=True)
    scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)
    epochs = []
    for epoch in range(1, args.epochs + 1):
        if train_sampler is not None:
            train_sampler.set_epoch(epoch)
        losses = train(args, model, device, train_loader, optimizer)
        epochs.append({"losses": losses, **test(args, model, device, test_loader, world)})
        scheduler.step()
    net = model.module if hasattr(model, "module") else model
    params = {k: v.detach().float().cpu() for k, v in net.state_dict().items()}
    return {"epochs": epochs, "param_device": str(next(net.parameters()).device),
            "params": {k: v.flatten()[:64].tolist() for k, v in params.items()},
            "param_sums": {k: float(v.double().abs().sum()) for k, v in params.items()}}


def cpu_ddp_reference(args, world: int) -> dict:
    """What DDP over `world` ranks computes, in one CPU process: each rank's loss on its own
    shard of the batch, gradients averaged, one Adadelta step."""
    torch.manual_seed(args.seed)
    transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])
    train_set = datasets.MNIST(args.data_path, train=True, download=True, transform=transform)
    model = Net(dropout=args.dropout)
    optimizer = optim.Adadelta(model.parameters(), lr=args.lr)
    scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)
    epochs = []
    for epoch in range(1, args.epochs + 1):
        shards = []
        for r in range(world):
            sampler = torch.utils.data.distributed.DistributedSampler(train_set, num_replicas=world, rank=r)
            sampler.set_epoch(epoch)
            shards.append(iter(torch.utils.data.DataLoader(train_set, batch_size=args.batch_size,
                                                           sampler=sampler, drop_last=True)))
        losses = [[] for _ in range(world)]
        for batches in zip(*shards):
            optimizer.zero_grad()
            total = 0
            for r, (data, target) in enumerate(batches):
                loss = F.nll_loss(model(data), target)
                losses[r].append(loss.item())
                total = total + loss / world
            total.backward()
            optimizer.step()
        epochs.append(losses)
        scheduler.step()
    return {"epochs": epochs, "params": {k: v.detach().flatten()[:64].tolist() for k, v in model.state_dict().items()}}


class SimpleModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 256)
        self.fc2 = nn.Linear(256, 64)
        self.fc3 = nn.Linear(64, 10)

    def forward(self, x):
        out = x.view(-1, 28 * 28)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(out)))))


def run_example(args) -> dict:
    """example.py: the MLP, SGD(momentum 0.9, weight decay 5e-4), MultiStepLR, mark_step in
    the test loop, and a checkpoint written from a CPU copy of the weights."""
    device = torch.device("hpu" if args.hpu else "cpu")
    torch.manual_seed(args.seed)
    transform = transforms.Compose([transforms.ToTensor()])
    train_set = datasets.MNIST(args.data_path, train=True, download=True, transform=transform)
    test_set = datasets.MNIST(args.data_path, train=False, download=True, transform=transform)
    train_loader = torch.utils.data.DataLoader(train_set, batch_size=128, shuffle=False)
    test_loader = torch.utils.data.DataLoader(test_set, batch_size=128, shuffle=False)
    net = SimpleModel().to(device)
    criterion = nn.CrossEntropyLoss()
    optimizer = optim.SGD(net.parameters(), lr=0.01 * args.lr, momentum=0.9, weight_decay=5e-4)
    scheduler = MultiStepLR(optimizer, milestones=[args.epochs // 2, 3 * args.epochs // 4], gamma=0.1)
    epochs = []
    save_dir = tempfile.mkdtemp(prefix="checkpoints_", dir=args.data_path)
    for epoch in range(1, args.epochs + 1):
        net.train()
        train_loss, correct, total = 0.0, 0, 0
        for data, targets in train_loader:
            data, targets = data.to(device), targets.to(device)
            optimizer.zero_grad()
            outputs = net(data)
            loss = criterion(outputs, targets)
            loss.backward()
            optimizer.step()
            train_loss += loss.item()
            _, predicted = outputs.max(1)
            total += targets.size(0)
            correct += predicted.eq(targets).sum().item()
        net.eval()
        test_loss, test_correct, test_total = 0.0, 0, 0
        with torch.no_grad():
            for data, targets in test_loader:
                data, targets = data.to(device), targets.to(device)
                outputs = net(data)
                loss = criterion(outputs, targets)
                htcore.mark_step()
                test_loss += loss.item()
                _, predicted = outputs.max(1)
                test_total += targets.size(0)
                test_correct += predicted.eq(targets).sum().item()
        copy_net = SimpleModel()
        copy_net.load_state_dict(net.state_dict())
        path = os.path.join(save_dir, f"epoch_{epoch}.pth")
        torch.save(copy_net.state_dict(), path)
        reloaded = torch.load(path)
        epochs.append({"train_loss": train_loss / len(train_loader), "train_acc": 100.0 * correct / total,
                       "test_loss": test_loss / len(test_loader), "test_acc": 100.0 * test_correct / test_total,
                       "ckpt_equal": all(torch.equal(reloaded[k], v.cpu()) for k, v in net.state_dict().items())})
        scheduler.step()
    return {"epochs": epochs}


def parse(argv: list) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="hello world (mnist.py / example.py) on hpusim")
    p.add_argument("--script", choices=["mnist", "example"], default="mnist")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--test-batch-size", type=int, default=1000)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--lr", type=float, default=1.0)
    p.add_argument("--gamma", type=float, default=0.7)
    p.add_argument("--use-torch-compile", action="store_true")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--hpu", action="store_true")
    p.add_argument("--data-path", type=str, default="../data")
    p.add_argument("--autocast", action="store_true")
    p.add_argument("--max-training-step", type=int, default=0)
    p.add_argument("--dropout", type=float, default=1.0, help="scale of the dropout rates (0: none)")
    p.add_argument("--workers", type=int, default=0, help="DataLoader workers in distributed runs")
    p.add_argument("--cpu-ddp-reference", action="store_true", help="also compute the CPU DDP reference")
    return p.parse_args(argv)


def main() -> None:
    # Each argument after the script name is one run ("--hpu --autocast ..." as one string),
    # all in this process; mnist.py's own module-level set-up happens once.
    torch.multiprocessing.set_start_method("spawn")
    results = []
    rank, world = None, None
    for spec in sys.argv[1:]:
        args = parse(spec.split())
        start = time.perf_counter()
        if args.hpu:
            # mnist.py: torch.cuda calls the multiprocessing data loader makes unconditionally.
            torch.cuda.current_device = lambda: None
            torch.cuda.set_device = lambda x: None
        if rank is None:
            rank, world = init_distributed(args)
        if args.script == "example":
            out = run_example(args)
        else:
            out = run_mnist(args, rank, world)
            if args.cpu_ddp_reference and rank == 0:
                out["cpu_ddp_reference"] = cpu_ddp_reference(args, world)
        results.append({"spec": spec, "rank": rank, "world": world, "lazy": htcore.is_lazy(),
                        "seconds": round(time.perf_counter() - start, 2), **out})
    print("RESULT " + json.dumps(results), flush=True)
    if world and world > 1:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
