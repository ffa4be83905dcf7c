"""Memory a graph needs, estimated during validation, before anything large is allocated.

Shape inference builds and runs every op block on meta tensors, so the parameters, buffers
and the tensors one batch makes inside each node (counted as the forward runs, not only
its outputs) are known without memory; data blocks build
their datasets for real, so they call `need` with their own estimate before generating.
A node whose share alone exceeds the memory available is reported as `too_large` naming
the param to lower (found by trying it at its smallest value); a graph whose total
exceeds it is reported on its largest node. The limit is the memory this process can
still get (MemAvailable, the cgroup's and RLIMIT_AS's room), overridden by `memory_limit`
(tests) or the NODEGRAPH_MEMORY_LIMIT environment variable (bytes, or a number with K, M,
G or T).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from nodegraph.kinds import shapes
from nodegraph.model import bounded
from nodegraph.model.errors import PortError, Problem

try:
    import resource
except ImportError:  # Windows: no RLIMIT_AS to read
    resource = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from nodegraph.kinds.datameta import DataMeta
    from nodegraph.model.spec import BlockSpec, Params

KIND = "too_large"
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_limit: ContextVar[int | None] = ContextVar("nodegraph_memory_limit", default=None)


class TooLarge(PortError):
    """A size that cannot fit in memory; `port` is the param to lower (None: the inputs)."""

    def __init__(self, param: str | None, message: str, hint: str = ""):
        super().__init__(param, message, hint, kind=KIND)


# -- the limit ------------------------------------------------------------------------------

@contextmanager
def memory_limit(nbytes: int | None) -> Iterator[None]:
    """Within this block, validation assumes `nbytes` of memory (None: read the machine)."""
    token = _limit.set(nbytes)
    try:
        yield
    finally:
        _limit.reset(token)


def limit_bytes() -> int | None:
    """The memory a graph may use: `memory_limit`, else the environment, else the machine."""
    given = _limit.get()
    if given is not None:
        return given
    env = os.environ.get("NODEGRAPH_MEMORY_LIMIT", "").strip().upper().removesuffix("B")
    if env:
        try:
            return int(float(env[:-1] if env[-1] in _UNITS else env) * _UNITS.get(env[-1], 1))
        except (ValueError, IndexError):
            pass  # a malformed setting falls back to the machine's memory
    return available_bytes()


def available_bytes() -> int | None:
    """Memory this process can still allocate: the least of the kernel's MemAvailable, the
    room left under the cgroup's memory.max and under RLIMIT_AS; None when none is known.
    Read at most every half second: validation asks once per node."""
    now = time.monotonic()
    if now - _read_at[0] > 0.5:
        _read_at[:] = [now, _available()]
    return _read_at[1]


_read_at: list = [float("-inf"), None]  # when the machine was last read, and what it said


def _available() -> int | None:
    room = []
    meminfo = _read_kb("/proc/meminfo", "MemAvailable:")
    if meminfo is not None:
        room.append(meminfo)
    else:
        try:
            import psutil  # type: ignore[import-not-found]

            room.append(psutil.virtual_memory().available)
        except ImportError:
            pass
    try:
        with open("/sys/fs/cgroup/memory.max") as f:
            cap = f.read().strip()
        with open("/sys/fs/cgroup/memory.current") as f:
            used = int(f.read().strip())
        if cap != "max":
            room.append(int(cap) - used)
    except (OSError, ValueError):
        pass
    soft = resource.getrlimit(resource.RLIMIT_AS)[0] if resource else -1
    if resource and soft != resource.RLIM_INFINITY:
        room.append(soft - (_read_kb("/proc/self/status", "VmSize:") or 0))
    return max(0, min(room)) if room else None


def _read_kb(path: str, key: str) -> int | None:
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def size_text(nbytes: float) -> str:
    """Bytes for people: '12 KB', '3.4 GB'."""
    for unit in ("bytes", "KB", "MB", "GB", "TB", "PB"):
        if nbytes < 1000 or unit == "PB":
            return f"{nbytes:.0f} {unit}" if unit == "bytes" or nbytes >= 10 else \
                f"{nbytes:.1f} {unit}"
        nbytes /= 1000
    raise AssertionError("unreachable")


# -- the guard blocks call before they allocate ---------------------------------------------

def need(nbytes: float, param: str, value: object, what: str, hint: str = "") -> None:
    """Raise TooLarge when `what`, sized by `param` = `value`, would take more memory than
    the limit. Blocks call it before allocating in proportion to a param (or to an input
    port's size: then `param` is the port and `value` None)."""
    limit = limit_bytes()
    if limit is not None and nbytes > limit:
        shown = "" if value is None else f" ('{param}' = " + (
            f"{value:,}" if isinstance(value, int) else str(value)) + ")"
        raise TooLarge(param, f"needs about {size_text(nbytes)} for {what}{shown}, more than "
                       f"the {size_text(limit)} of memory available",
                       hint or f"lower '{param}'")


def on_meta() -> bool:
    """True while validation builds blocks on meta tensors (nothing real may be allocated)."""
    return torch.get_default_device().type == "meta"


# -- what a node takes ----------------------------------------------------------------------

def module_bytes(module: torch.nn.Module) -> tuple[int, int]:
    """Bytes of a module's parameters and of its buffers (meta tensors count their shape)."""
    params = sum(p.numel() * p.element_size() for p in module.parameters())
    buffers = sum(b.numel() * b.element_size() for b in module.buffers())
    return params, buffers


class _Allocations(TorchDispatchMode):
    """Counts the bytes of every new tensor the ops under it make: the intermediates a
    forward holds (and autograd saves for backward), not only the block's outputs. Views,
    in-place writes and out= variants make no new memory."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # torch wraps a mode's __torch_dispatch__ so that torch.compile skips it, and that
        # wrapper imports torch._dynamo (and sympy, onnx: 1.5 s) on the first op. These
        # modes only count bytes during validation, which nothing compiles.
        return False

    def __init__(self) -> None:
        super().__init__()
        self.nbytes = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not (func.is_view or func._schema.is_mutable or func in _ALIASING):
            self.nbytes += tensor_bytes(tree_leaves(out))
        return out


_ALIASING = {torch.ops.aten._unsafe_view.default, torch.ops.aten.alias.default}


class _Bounded(_Allocations):
    """Counts as `_Allocations` does, and stops the work with TooLarge once the tensors
    made add up to more than `budget` bytes (at most one op's output past it)."""

    def __init__(self, budget: int, param: str | None, what: str) -> None:
        super().__init__()
        self.budget, self.param, self.what = budget, param, what

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = super().__torch_dispatch__(func, types, args, kwargs)
        if self.nbytes > self.budget:
            raise TooLarge(self.param, f"made more than {size_text(self.budget)} of tensors "
                           f"for {self.what}, more than the memory available",
                           f"lower '{self.param}'" if self.param else "lower the sizes "
                           "upstream of it")
        return out


@contextmanager
def bounded_work(nbytes: int, param: str | None, what: str) -> Iterator[None]:
    """Real work done during validation (`what`, sized by `param`), which must fit: first
    `need` for the `nbytes` foreseen, then, within this block, TooLarge as soon as the
    tensors made exceed the memory available (no limit known: unbounded)."""
    need(nbytes, param or "", None, what, f"lower '{param}'" if param else "")
    limit = limit_bytes()
    if limit is None:
        yield
        return
    with _Bounded(limit, param, what):
        yield


def run_counted(module: torch.nn.Module, args: list) -> tuple[Any, int]:
    """`module(*args)` on meta inputs, and the bytes of the tensors it made on the way."""
    try:
        with _Allocations() as counted:
            out = module(*args)  # meta inputs reach meta kernels; the device mode is slower
    except Exception:
        with torch.device("meta"), _Allocations() as counted:  # new tensors without a device
            out = module(*args)
    # a call of pure-Python arithmetic makes values no tensor counts: their bytes too
    return out, counted.nbytes + sum(bounded.python_bytes(v) for v in tree_leaves(out))


def tensor_bytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))


def dataset_bytes(dataset) -> int:
    """Bytes a dataset holds in memory: a streamed one holds a batch at a time."""
    from nodegraph.kinds.dataset import SPLITS

    if getattr(dataset, "streamed", False):
        return 0

    return sum(tensor_bytes(dataset.tensors(s).values()) for s in SPLITS if dataset.has(s))


def check_op(spec: BlockSpec, params: Params, inputs: dict, nbytes: int) -> None:
    """Raise TooLarge when an op node's parameters, buffers and the tensors one forward
    makes exceed the limit, naming the param whose smallest value shrinks them most."""
    limit = limit_bytes()
    if limit is None or nbytes <= limit:
        return
    param = _blame(spec, params, inputs, nbytes)
    value = params[param] if param else None
    where = (f"'{param}' = {value:,}" if type(value) is int else f"'{param}' = {value}"
             if param else "its inputs' sizes")
    raise TooLarge(param, f"needs about {size_text(nbytes)} for its weights and one batch "
                   f"through it ({where}), more than the {size_text(limit)} of memory "
                   "available",
                   f"lower '{param}'" if param else "lower the sizes upstream of it (data "
                   "batch_size, layer widths)")


def check_data(params: Params, nbytes: int) -> None:
    """Raise TooLarge when a built dataset alone exceeds the limit (a block that did not
    estimate its size beforehand)."""
    limit = limit_bytes()
    if limit is not None and nbytes > limit:
        raise TooLarge("n" if "n" in params else None, f"holds about {size_text(nbytes)} of "
                       f"data, more than the {size_text(limit)} of memory available",
                       "use fewer or smaller samples")


def _blame(spec: BlockSpec, params: Params, inputs: dict, nbytes: int) -> str | None:
    """The size param (int, or one entry of ints) whose smallest allowed value cuts the
    node's bytes most, to under half; None when only the inputs' sizes would."""
    from nodegraph.model.spec import Params

    best, best_bytes = None, nbytes / 2
    for name, value in _smaller_values(spec, params):
        try:
            smaller = _measure(spec, Params({**params, name: value}), inputs)
        except Exception:  # noqa: BLE001 (a value the block refuses tells nothing)
            continue
        if smaller < best_bytes:
            best, best_bytes = name, smaller
    return best


def _smaller_values(spec: BlockSpec, params: Params) -> Iterator[tuple[str, object]]:
    for p in spec.params:
        value, low = params.get(p.name), max(1, int(p.min or 0))
        if p.kind == "int" and type(value) is int and value > low:
            yield p.name, low
        elif p.kind == "ints" and isinstance(value, list):
            for i, v in enumerate(value[:8]):
                if type(v) is int and v > low:
                    yield p.name, [*value[:i], low, *value[i + 1:]]


def _measure(spec: BlockSpec, params: Params, inputs: dict) -> int:
    ruled = shapes.infer(spec.shape, params, inputs) if spec.shape is not None else None
    if ruled is not None:  # a declared rule: nothing built
        return sum(ruled.nbytes)
    with torch.device("meta"):
        module = spec.build(params, inputs)
    return sum(module_bytes(module)) + run_counted(module, [inputs.get(p.name)
                                                           for p in spec.inputs])[1]


# -- the whole graph ------------------------------------------------------------------------

@dataclass
class Footprint:
    """Bytes a graph needs to hold its weights, one batch of activations and its data."""

    parameters: int = 0
    buffers: int = 0
    activations: int = 0
    data: int = 0
    nodes: dict[str, int] = field(default_factory=dict)  # bytes per node

    @property
    def total(self) -> int:
        return self.parameters + self.buffers + self.activations + self.data

    def text(self) -> str:
        parts = [(self.parameters, "parameters"), (self.buffers, "buffers"),
                 (self.activations, "one batch of activations"), (self.data, "data")]
        return f"about {size_text(self.total)} (" + ", ".join(
            f"{size_text(b)} for {what}" for b, what in parts if b or what != "buffers") + ")"


class Report(Protocol):
    """What the estimate reads of a validation report, and the one field it sets
    (`nodegraph.check.validate.Report` is one; typed here, the kinds never import it)."""

    memory: Footprint | None

    @property
    def flat(self) -> Any: ...  # the expanded graph, with `shared`: sharer -> owner

    @property
    def module_bytes(self) -> Mapping[str, tuple[int, int, int]]: ...

    @property
    def data(self) -> Mapping[str, DataMeta]: ...

    @property
    def outputs(self) -> Mapping[tuple[str, str], torch.Tensor]: ...

    @property
    def problems(self) -> list[Problem]: ...


def estimate(report: Report) -> Footprint:
    """The footprint of a validated graph, from the shapes and datasets inference left."""
    fp = Footprint()
    shared = report.flat.shared if report.flat else {}
    for node_id, (params, buffers, work) in report.module_bytes.items():
        if node_id in shared:  # a sharer uses its owner's weights
            params = buffers = 0
        fp.parameters += params
        fp.buffers += buffers
        fp.activations += work
        fp.nodes[node_id] = params + buffers + work
    for node_id, data in report.data.items():  # the data, and one batch taken of it
        batch = tensor_bytes(t for (n, _), t in report.outputs.items() if n == node_id)
        nbytes = data.nbytes
        fp.data += nbytes
        fp.activations += batch
        fp.nodes[node_id] = nbytes + batch
    return fp


def check_graph(report: Report) -> None:
    """Record the estimate on the report, and a `too_large` problem when the total exceeds
    the limit, placed on the node that takes the most."""
    report.memory = fp = estimate(report)
    limit = limit_bytes()
    if limit is None or fp.total <= limit or not fp.nodes:
        return
    top = sorted(fp.nodes.items(), key=lambda kv: -kv[1])[:3]
    largest = ", ".join(f"'{n}' {size_text(b)}" for n, b in top)
    report.problems.append(Problem(
        top[0][0], None, KIND, f"the graph needs {fp.text()}, more than the "
        f"{size_text(limit)} of memory available; the largest nodes: {largest}",
        "lower the sizes of the largest nodes (widths, samples, batch_size)"))
