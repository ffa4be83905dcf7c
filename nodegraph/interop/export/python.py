"""`nodegraph export --to python`: one file with the model class and the training run.

The file needs torch only to import the model (numpy, and scikit-learn for its datasets,
only to train). Its layout, top to bottom: imports; the code copied from blocks; the model
class (see `export.model`); then, for a graph that trains, the training part (see
`export.script` and `export.data`) with a `train()` function and a `main()` under
``if __name__ == "__main__"``. One file keeps the model importable (``from model import
XorMlp`` runs no training) and the whole run readable in one place.

The graph is compiled once on the CPU while the constructor calls are recorded, the file is
written from that, and then it is executed and held to the compiled graph before it is
saved (see `ModelWriter.check`); the caller's random state is left as it was.
"""

from __future__ import annotations

import builtins
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn

from nodegraph.interop.export.data import DataCode, data_code
from nodegraph.interop.export.model import ModelWriter, partition, unexportable
from nodegraph.interop.export.packages import loader
from nodegraph.interop.export.record import recording
from nodegraph.interop.export.script import ScriptWriter
from nodegraph.interop.export.source import Source
from nodegraph.interop.export.stream import STREAM, stream_code
from nodegraph.interop.export.syntax import LINE, class_name, identifier, in_docstring
from nodegraph.kinds.metric import Metric
from nodegraph.kinds.streamed import is_streamed
from nodegraph.model import settings
from nodegraph.model.errors import ValidationError
from nodegraph.model.fileformat import atomic_write_text
from nodegraph.model.graph import Graph
from nodegraph.runtime.compile import compile_graph

RECORDED = (nn.Module, torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler, Metric)
HELPERS = ("SEED", "EPOCHS", "STAGES", "DEVICE", "EVAL_BATCH_SIZE", "LOSSES", "OBJECTIVE",
           "MONITOR",
           "PATIENCE",
           "MIN_DELTA", "BATCH_SIZE", "batches", "mean_losses", "metric_values",
           "update_metrics", "evaluate", "train", "main", "Stream", "Collate", "Transforms",
           "MixBatch",
           "Seeded", "EpochOrder", "sample_seed", "seeded", "v2", "load_torchvision", "readers",
           "transforms", "mix", "arrays")


@dataclass
class PythonExport:
    """What `to_python` wrote."""

    path: Path
    class_name: str
    trains: bool
    npz: Path | None = None
    saved_data: dict[str, str] = field(default_factory=dict)  # data node -> its block id


def trains(graph: Graph) -> bool:
    reg = graph.registry
    return any(n.type in reg and reg.get(n.type).kind == "optimizer" for n in graph)


def to_python(graph: Graph, path: str | Path, source_name: str | None = None) -> PythonExport:
    """Write `graph` as a Python file at `path` (and an .npz beside it when some data has
    no recipe). Raises ExportError naming the blocks that cannot be written."""
    path = Path(path)
    opts, problems = settings.resolve(graph.training)
    if problems:
        raise ValidationError(problems)
    training = trains(graph)
    with torch.random.fork_rng(devices=[]):
        with recording(*RECORDED) as recorder:
            # the class starts from fresh weights, as compile does without an imported file
            compiled = compile_graph(graph, device="cpu", seed=opts["seed"], for_training=training,
                               referenced_weights=False)
        rng = torch.get_rng_state()
        initial = full_state(compiled.module)
        parts = partition(compiled)
        source = Source()
        for name in HELPERS:
            source.reserve(name)
        model = ModelWriter(compiled, recorder, source, parts, class_name(graph.name))
        class_text = model.write()
        npz_name = f"{path.stem}_data.npz"
        data: list[DataCode] = []
        streamed: dict[str | None, str] = {}
        training_text = None
        if training:
            for nid, ds in compiled.datasets.items():
                name = _load_name(source, nid)
                code = (stream_code(compiled, nid, name, npz_name, opts) if is_streamed(ds)
                        else data_code(compiled, nid, name, npz_name))
                if isinstance(code, str):
                    streamed[nid] = code
                else:
                    data.append(code)
            if streamed:
                raise unexportable(streamed, "export --to onnx or --to weights, or set its "
                                   "storage to memory (without random augmentation)")
            training_text = _training(compiled, recorder, source, parts, model, data, opts,
                                      source_name or graph.name)
        # torchvision importable beside a CPU torch
        prelude = loader(graph, source, any(d.torchvision for d in data) or any(
            p.image is not None and p.image.script for p in model.preprocess.values()))
        for _ in range(2):  # a second round writes the values set by hand as literals
            text = _assemble(graph, source, [class_text, *filter(None, [training_text])],
                             model.name, source_name, path, training, prelude)
            namespace = {"__name__": "nodegraph_export", "__file__": str(path)}
            exec(builtins.compile(text, str(path), "exec"), namespace)
            fixups = model.check(namespace, opts["seed"], rng, initial)
            if not fixups:
                break
            model.fixups.update(fixups)
            class_text = model.write()
    atomic_write_text(path, text)
    arrays = {k: v for d in data if d.arrays is not None for k, v in d.arrays.items()}
    npz = None
    if arrays:
        npz = path.with_name(npz_name)
        np.savez(npz, allow_pickle=True, **arrays)  # numpy's default, named for mypy
    return PythonExport(path, model.name, training, npz,
                        {d.node: compiled.report.specs[d.node].id for d in data
                         if d.arrays is not None and not is_streamed(compiled.datasets[d.node])})


def full_state(module) -> dict[str, torch.Tensor]:
    """Every weight keyed `node.param`, a tied tensor under each of its names (as the
    exported class's `state_dict` lists it; `block_state` lists it once)."""
    return {k.removeprefix("blocks."): v.detach().clone() for k, v in module.state_dict().items()}


def _load_name(source: Source, node: str) -> str:
    name = identifier(f"load_{node}")
    source.reserve(name)
    return name


def _training(compiled, recorder, source, parts, model, data, opts, source_name) -> str:
    writer = ScriptWriter(compiled, recorder, source, parts, model, data, opts, source_name)
    for d in data:
        for module, name, alias in d.imports:
            source.add_import(module, name, alias)
    helpers = writer.helpers()
    train = writer.train_function()
    main = writer.main_function()
    constants = writer.constants() + (writer.stages() if opts["stages"] else [])
    if writer.problems:
        raise unexportable(writer.problems)
    copied = source.definitions("training")
    defs = [text for d in data for text in d.definitions]
    if any(is_streamed(compiled.datasets[d.node]) for d in data):
        defs = [STREAM, *dict.fromkeys(defs)]
    blocks = ["\n".join(constants), *copied, *defs, *(d.text for d in data), *helpers, train,
              main]
    return "# -- training: what `nodegraph run` does with this graph " + "-" * 34 + \
        "\n\n" + "\n\n\n".join(blocks) + '\n\n\nif __name__ == "__main__":\n    main()'


def _assemble(graph: Graph, source: Source, sections: list[str], name: str,
              source_name: str | None, path: Path, training: bool,
              prelude: str | None = None) -> str:
    origin = f" from {source_name}" if source_name else ""
    paragraphs = [
        f"{graph.name} as plain PyTorch, exported by nodegraph{origin}.",
        f"`{name}` holds one attribute per block, named by its node id, so weights saved by "
        "nodegraph (keys `node.param`) load with `model.load_state_dict(...)`, e.g. from the "
        "file `nodegraph export --to weights` writes, through `safetensors.torch.load_file`."]
    if training:
        paragraphs.append("Running this file trains the model as `nodegraph run` does — the "
                          "same data, split, seed, batches, optimizers and schedules — so it "
                          "gives the same loss curve up to float rounding:")
    doc = []
    for text in paragraphs:
        lines = textwrap.wrap(in_docstring(text), LINE - 3)
        doc += [*lines, ""]
    doc[0] = '"""' + doc[0]
    if training:
        doc.append(f"    python {in_docstring(path.name)} [--epochs N] [--metrics-out "
                   "FILE.json]")
    else:
        doc.pop()
    doc.append('"""')
    model_defs = source.definitions("model")
    rest = "\n\n\n".join([*filter(None, [prelude]), *model_defs, *sections])
    # isort leaves one blank line before a statement after the imports, two before a def
    gap = "\n\n\n" if rest.startswith(("class ", "def ", "@", "# ")) else "\n\n"
    text = "\n".join(doc) + "\n\n" + source.import_lines() + gap + rest + "\n"
    return "\n".join(_long_names_allowed(line) for line in text.split("\n"))


def _long_names_allowed(line: str) -> str:
    """A line that cannot be wrapped under LINE (a node deep in nested groups is named by
    its whole path, longer than a line by itself) told to the linter, not renamed: the names
    are the ones the graph file, the weights and the errors use."""
    if len(line) <= LINE or '"""' in line or "'''" in line:
        return line
    return line + "  # noqa: E501"
