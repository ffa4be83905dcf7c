"""Data-parallel training on several processes, on PyTorch's own engine (torchrun + DDP).

`torchrun --nproc_per_node=N -m nodegraph run GRAPH ...` (or `nodegraph run --nproc N`, which
starts torchrun) gives each process a rank. Every rank builds the same graph with the same
seed and walks the same shuffled order of the training split; each takes its share of every
global batch, and DistributedDataParallel averages the gradients. The loss of a rank is
scaled by its share of the batch (n_rank · world / n_batch), so uneven last batches still
give the gradient of the whole batch's mean loss: the run follows the single-process run
with the same global batch size. Validation and the final evaluation run on the whole split
on every rank, so every rank sees the same numbers and makes the same early-stopping choice;
only rank 0 writes checkpoints, metrics and probe frames.

Across machines, ``nodegraph run GRAPH --nnodes N --node-rank R --rdzv HOST:PORT`` on each
machine starts torchrun with a static rendezvous at machine 0 (``--nproc`` processes per
machine, default 1). A streamed dataset (`nodegraph.kinds.streamed`) reads only its rank's
share of every global batch, so no rank reads the whole dataset; the trainer checks that
every rank sees the same split sizes (the same files) before the first step.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from nodegraph.model.errors import NodegraphError
from nodegraph.runtime import orphans


@dataclass(frozen=True)
class Group:
    """This process's place in a distributed run."""

    rank: int
    world: int
    local_rank: int

    @property
    def main(self) -> bool:
        return self.rank == 0

    def shard(self, batch: dict) -> tuple[dict, float]:
        """This rank's part of a global batch, and the factor that makes the averaged
        gradient equal the gradient of the whole batch's mean loss."""
        n = next(iter(batch.values())).shape[0]
        part = {k: v.tensor_split(self.world)[self.rank] for k, v in batch.items()}
        mine = next(iter(part.values())).shape[0]
        return part, (mine * self.world / n) if n else 0.0

    def sum(self, values: list[float]) -> list[float]:
        """Element-wise sum over all ranks."""
        t = torch.tensor(values, dtype=torch.float64, device=_comm_device())
        dist.all_reduce(t)
        return t.tolist()

    def gather(self, obj: Any) -> list[Any]:
        out: list[Any] = [None] * self.world
        dist.all_gather_object(out, obj)
        return out


def current() -> Group | None:
    """The group when this process was started by torchrun with more than one rank."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return None
    return Group(int(os.environ["RANK"]), world, int(os.environ.get("LOCAL_RANK", "0")))


def is_main() -> bool:
    group = current()
    return group is None or group.main


def setup(group: Group, device: str) -> str:
    """Join the process group; returns the device this rank trains on."""
    wants_cuda = device.startswith("cuda") or (device == "auto" and torch.cuda.is_available())
    if not dist.is_initialized():
        dist.init_process_group("nccl" if wants_cuda else "gloo")
    if wants_cuda:
        torch.cuda.set_device(group.local_rank)
        return f"cuda:{group.local_rank}"
    return "cpu"


def wrap(module: torch.nn.Module, device: torch.device, find_unused: bool):
    """The module under DDP: its forward averages gradients across ranks in backward."""
    ids = [device.index] if device.type == "cuda" else None
    return DistributedDataParallel(module, device_ids=ids, find_unused_parameters=find_unused)


def teardown() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def _comm_device() -> torch.device:
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def launch(nproc: int, argv: list[str]) -> int:
    """Run `nodegraph <argv>` under torchrun with `nproc` processes on this machine."""
    if nproc < 1:
        raise NodegraphError("--nproc must be at least 1")
    return _torchrun(["--standalone", f"--nproc_per_node={nproc}"], argv)


def launch_nodes(nnodes: int, node_rank: int | None, rdzv: str | None, nproc: int,
                 argv: list[str]) -> int:
    """Run `nodegraph <argv>` as machine `node_rank` of `nnodes`, `nproc` processes here,
    meeting the others at `rdzv` (HOST:PORT of machine 0). torchrun's static rendezvous
    numbers the ranks node_rank · nproc + local rank, so each machine reads the same part
    of a streamed dataset every run."""
    if nnodes < 1 or nproc < 1:
        raise NodegraphError("--nnodes and --nproc must be at least 1")
    if node_rank is None or not 0 <= node_rank < nnodes:
        raise NodegraphError(f"--node-rank must be given, 0 to {nnodes - 1}, with --nnodes "
                             f"{nnodes}")
    host, _, port = (rdzv or "").rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise NodegraphError(f"--rdzv must be HOST:PORT (machine 0's address and a free port "
                             f"there), not {rdzv!r}")
    return _torchrun([f"--nnodes={nnodes}", f"--node_rank={node_rank}",
                      f"--nproc_per_node={nproc}", f"--master_addr={host.strip('[]')}",
                      f"--master_port={port}"], argv)


def _torchrun(options: list[str], argv: list[str]) -> int:
    command = [sys.executable, "-m", "torch.distributed.run", *options,
               "-m", "nodegraph", *argv]
    # A rank that dies by a signal (SIGABRT from C++, SIGSEGV) prints the Python stack of
    # each of its threads, so its death names where it happened.
    env = {**os.environ, "PYTHONFAULTHANDLER": os.environ.get("PYTHONFAULTHANDLER") or "1"}
    return launched(command, env)


def launched(command: list[str], env: dict[str, str]) -> int:
    """Run `command` (torchrun) to its end; a SIGTERM to this process is passed on, and
    the processes it leaves behind are stopped (`orphans`). Its exit code."""
    orphans.adopt_orphans()  # ranks torchrun could not stop come to this process
    child = subprocess.Popen(command, env=env)
    # A SIGTERM to this process (a scheduler, a test's timeout) must reach torchrun, which
    # stops its ranks; else they train on with nobody to report to. Ctrl-C reaches the
    # whole foreground group, torchrun included, by itself.
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: child.send_signal(signum))
    try:
        return child.wait()
    finally:
        signal.signal(signal.SIGTERM, previous)
        stopped = orphans.stop_adopted()
        if stopped:  # torchrun ended before it could stop them (a signal while it started)
            print(f"stopped {len(stopped)} process(es) torchrun left running (pids "
                  f"{', '.join(map(str, stopped))})", file=sys.stderr)
