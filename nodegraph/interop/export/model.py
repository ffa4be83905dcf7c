"""The forward graph as an `nn.Module` class a person could have written.

A compiled graph splits in two: the *prediction* part (op blocks that are not losses and do
not depend on one) and the *scoring* part (losses, penalties, and whatever is computed
from them). The class gets one attribute per block with a module, named by its node id so
its `state_dict` keys are nodegraph's ``node.param`` keys; `forward` takes the data ports
the prediction part reads (``def forward(self, x)``) and returns its *heads*, the outputs
read by losses, metrics or nothing; `losses` returns every loss by node together with the
heads. Weightless blocks that wrap a function become an expression in `forward`.

Each block's code is checked before the file is written: built with the same seed it must
draw the same initial weights as the compiled graph, and given the same inputs it must
give the same outputs. A block that fails, or that has no code at all, is reported by node
with the reason.
"""

from __future__ import annotations

import ast
import inspect
import keyword
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, cast

import torch
from torch import nn

from nodegraph.interop.export.declared import torch_call
from nodegraph.interop.export.record import Call, Recorder
from nodegraph.interop.export.source import MAX_TENSOR_LITERAL, Source
from nodegraph.interop.export.syntax import (
    LINE,
    Unexportable,
    attribute_path,
    call_lines,
    docstring,
    identifier,
)
from nodegraph.kinds import dtypes
from nodegraph.model.errors import NodeRuntimeError, Problem, ValidationError, first_line
from nodegraph.runtime.compile import Compiled, Key
from nodegraph.runtime.preprocess import preprocessors, raw_example

SAMPLE_ROWS = 8  # rows of each batch the checks run on


class ExportError(ValidationError):
    """Blocks (or a graph) that cannot be exported, each with the reason."""


def unexportable(problems: dict[str | None, str], hint: str = "") -> ExportError:
    return ExportError([Problem(node, None, "unexportable", message, hint)
                        for node, message in problems.items()])


# -- the two parts of a graph ----------------------------------------------------------


@dataclass
class Parts:
    """Which op blocks predict and which score, and the values that cross between."""

    order: list[str]  # every op node, in the order compile built them
    predict: list[str]
    scoring: list[str]
    heads: list[Key]  # prediction outputs read by scoring, metrics, or nothing
    read: list[Key]  # other op outputs metrics read (a loss block's side outputs)
    predict_inputs: list[Key]  # data ports the prediction part reads
    inputs: list[Key]  # data ports any op reads
    losses: dict[str, Key]  # loss node -> its loss output (as the trainer sums them)


def executed(compiled: Compiled):
    """The graph that runs: with its groups expanded into nodes ``INSTANCE__INNER``."""
    return compiled.exec_graph or compiled.graph


def partition(compiled: Compiled) -> Parts:
    graph, report = executed(compiled), compiled.report
    order = [step[0] for step in compiled.module.full_plan]
    scoring: set[str] = set()
    for nid in order:
        if nid in compiled.loss_keys or any(e.src in scoring for e in graph.edges_into(nid)):
            scoring.add(nid)
    predict = [n for n in order if n not in scoring]
    heads = [(nid, port.name) for nid in predict for port in report.specs[nid].outputs
             if _read_outside(graph, nid, port.name, set(predict))]
    imported = compiled.graph.extra.get("imported") if isinstance(compiled.graph.extra,
                                                                   dict) else None
    if isinstance(imported, dict) and isinstance(imported.get("outputs"), list):
        # every output of an imported module (a dict's "features" that also feed the logits)
        named = [tuple(str(o).split(".", 1)) for o in imported["outputs"]]
        heads += [k for k in named if len(k) == 2 and k[0] in predict and k not in heads]
    data = [nid for nid in report.order if report.specs[nid].kind == "data"]

    def read_by(nodes: list[str]) -> list[Key]:
        used = {e.source for n in nodes for e in graph.edges_into(n) if e.src in data}
        return [(d, p.name) for d in data for p in report.specs[d].outputs if (d, p.name) in used]

    metric_reads = [e.source for m in compiled.metrics for e in graph.edges_into(m.node)]
    read = [k for k in dict.fromkeys(metric_reads) if k[0] in scoring]
    return Parts(order, predict, [n for n in order if n in scoring], heads, read,
                 read_by(predict), read_by(order), dict(compiled.loss_keys))


def _read_outside(graph, nid: str, port: str, predict: set[str]) -> bool:
    """Read by a loss, a metric or another block outside the prediction part; or the block
    is an end of the graph (no output of it is read at all)."""
    readers = [e.dst for e in graph.edges_from(nid) if e.src_port == port]
    return any(r not in predict for r in readers) or not graph.edges_from(nid)


def bound_nodes(compiled: Compiled, node: str) -> list[str]:
    """The nodes whose modules compile hands a ``binds`` block (see `compile._bind`)."""
    spec = compiled.report.specs[node]
    blocks = compiled.module.blocks
    return compiled.report.params[node].get(spec.binds) or [
        n for n, m in blocks.items() if n != node and any(True for _ in m.parameters())]


# -- one block as code ---------------------------------------------------------------------


@dataclass
class BlockCode:
    """How one op block appears in the class: an attribute it calls, or an expression."""

    node: str
    init: list[str] = field(default_factory=list)  # lines of __init__ (without indent)
    template: str | None = None  # an expression over the placeholders ARG0, ARG1...
    alias: str | None = None  # the node whose module this one uses (shared weights)

    @property
    def inline(self) -> bool:
        return self.template is not None


def placeholder(i: int) -> str:
    return f"ARG{i}__"


def is_function_wrapper(module: nn.Module) -> bool:
    """A weightless module that only calls a function it holds (layers.Fn and the like)."""
    return (callable(getattr(module, "fn", None)) and not any(True for _ in module.parameters())
            and not any(True for _ in module.buffers()) and not any(True for _ in
                                                                  module.children()))


def local_name(node: str, nodes: list[str]) -> str:
    """A node's id without the group prefixes of its expanded id (``unet__down1__conv`` ->
    ``conv``), keeping as many as it takes to tell it from the other `nodes`: the local
    name a person would give the value in `forward`."""
    parts = node.split("__")
    for k in range(1, len(parts)):
        short = "__".join(parts[-k:])
        if not any(o == short or o.endswith("__" + short) for o in nodes if o != node):
            return short
    return node


def partial_optimizers(compiled: Compiled) -> list:
    """The optimizers whose step runs only the part of the graph their loss needs: all but
    the last (whose pass also feeds every loss and metric), when no stages are declared
    and no closure re-runs the graph. The exported model gets a method for each
    (`partial_method`), so blocks with running statistics (BatchNorm) see exactly the
    passes they see in nodegraph."""
    if compiled.report.settings.stages or len(compiled.optimizers) < 2:
        return []
    full = {step[0] for step in compiled.module.full_plan}
    return [o for o in compiled.optimizers[:-1]
            if not o.closure and {step[0] for step in o.plan} != full]


def partial_method(optimizer: str) -> str:
    return f"loss_for_{optimizer}"


def reserved_attribute(node: str) -> bool:
    """Node ids that cannot be attributes of an nn.Module (its methods and own state)."""
    return keyword.iskeyword(node) or node in dir(nn.Module) or node in vars(nn.Module())


class ModelWriter:
    """Writes the model class of one compiled graph; problems are collected by node."""

    def __init__(self, compiled: Compiled, recorder: Recorder, source: Source, parts: Parts,
                 name: str):
        self.c, self.recorder, self.source, self.parts, self.name = (
            compiled, recorder, source, parts, name)
        self.problems: dict[str | None, str] = {}
        self.blocks: dict[str, BlockCode] = {}
        self.names: dict[Key, str] = {}
        # values a block sets after building its module (weights given by hand), written
        # as literals; found by `check`
        self.fixups: dict[str, dict[str, torch.Tensor]] = {}
        # the inputs `forward` preprocesses when raw (`nodegraph.runtime.preprocess`)
        self.preprocess = {k: p for k, p in preprocessors(compiled,
                                                          parts.predict_inputs).items()
                           if not p.empty} if parts.predict else {}
        self.preprocess_name = "preprocess"

    def write(self) -> str:
        self.source.section = "model"
        self.source.ref(nn.Module)  # the class's base
        seen: dict[int, str] = {}
        for nid in self.parts.order:
            try:
                self.blocks[nid] = self._block(nid, seen)
            except Unexportable as e:
                self.problems[nid] = str(e)
        if self.problems:
            raise unexportable(self.problems, "replace the block, or export to ONNX instead")
        self.source.reserve(self.name)
        self.names = self._variable_names()
        while self.preprocess_name in self.blocks:  # a node of that name
            self.preprocess_name += "_"
        return "\n".join(self._class_lines())

    def _block(self, nid: str, seen: dict[int, str]) -> BlockCode:
        module = self.c.module.module_of(nid)
        if module is None:
            raise Unexportable(f"internal error: '{nid}' runs no module")
        spec = self.c.report.specs[nid]
        if is_function_wrapper(module):  # so `module.fn` is callable
            args = [placeholder(i) for i in range(len(spec.inputs))]
            fn = cast(Callable[..., Any], module.fn)
            return BlockCode(nid, template=self.source.inline(fn, args))
        if reserved_attribute(nid):
            raise Unexportable(f"its id '{nid}' is also the name of an nn.Module method or "
                               "attribute; rename the node")
        if id(module) in seen:  # one module at two places: shared weights, called twice
            return BlockCode(nid, [], alias=seen[id(module)])
        seen[id(module)] = nid
        call = self._declared_call(nid, module) or torch_call(
            self.c.report.specs[nid], module) or self.recorder.get(module)
        if call is None:
            raise Unexportable(f"its module ({type(module).__name__}) was not made by a "
                               "Python constructor call the exporter could see")
        dtype = (dtypes.node_dtype(spec, self.c.report.params[nid], self.c.report.settings)
                 if dtypes.has_float_state(module) else torch.float32)
        call, cast_lines = _in_dtype(call, dtype)
        callee, args = self.source.call(call)
        return BlockCode(nid, [*_body_lines(f"self.{nid}", callee, args),
                               *cast_lines(f"self.{nid}"), *self._after_building(nid, module)])

    def _declared_call(self, nid: str, module: nn.Module) -> Call | None:
        """The call the block's spec declares for its export (``BlockSpec.export``), given
        the block's params and input shapes as its build got them."""
        spec = self.c.report.specs[nid]
        if spec.export is None:
            return None
        report = self.c.report
        inputs = {e.dst_port: report.outputs[e.source]
                  for e in executed(self.c).edges_into(nid)}
        fn, kwargs = spec.export(report.params[nid], inputs)
        return Call(module, fn, dict(kwargs))

    def _ties(self) -> list[str]:
        """One Parameter used by two blocks (a tie): the later block gets the earlier's."""
        first: dict[int, tuple[str, str]] = {}
        lines = []
        for nid in self.parts.order:
            module = self.c.module.module_of(nid)
            if module is None or self.blocks[nid].inline or self.blocks[nid].alias:
                continue
            for path, p in module.named_parameters(remove_duplicate=False):
                owner = first.setdefault(id(p), (nid, path))
                if owner[0] != nid:
                    lines.append(f"{attribute_path(f'self.{nid}', path)} = "
                                 f"{attribute_path(f'self.{owner[0]}', owner[1])}  # tied")
        return lines

    def _after_building(self, nid: str, module: nn.Module) -> list[str]:
        """What the block did to its module once built: `torch.nn.init` calls, values set
        by hand, frozen weights."""
        lines = []
        state = dict(module.named_parameters()) | dict(module.named_buffers())
        for path, tensor in state.items():
            for init in self.recorder.inits_of(tensor):
                target = attribute_path(f"self.{nid}", path)
                callee, args = self.source.call(init, {next(iter(init.args)): target})
                lines += _body_lines("", callee, args)
        fixed = self.fixups.get(nid, {})
        if fixed:
            lines.append("with torch.no_grad():  # values set by hand in the graph")
            for path, value in fixed.items():
                lines += _body_lines("", f"{attribute_path(f'self.{nid}', path)}.copy_",
                                     [self.source.value(value)], 4)
        frozen = [path for path, p in module.named_parameters() if not p.requires_grad]
        if frozen and len(frozen) == len(list(module.parameters())):
            lines.append(f"self.{nid}.requires_grad_(False)  # not trained")
        else:
            lines += [f"{attribute_path(f'self.{nid}', path)}.requires_grad_(False)"
                      for path in frozen]
        return lines

    # -- names -----------------------------------------------------------------------------

    def attribute(self, node: str) -> str | None:
        """The attribute holding `node`'s module (its owner's, for shared weights); None
        for a node written inline or not a block."""
        code = self.blocks.get(node)
        if code is None or code.inline:
            return None
        return code.alias or node

    def _variable_names(self) -> dict[Key, str]:
        """A local name per value: the data port, or the node id ("node_port" for blocks
        with several outputs), never one the file uses at the top level."""
        taken = set(self.source.bound) | {"self"}
        for code in self.blocks.values():
            if code.template is not None:  # inline
                taken |= {n.id for n in ast.walk(ast.parse(code.template)) if
                          isinstance(n, ast.Name)}
        names: dict[Key, str] = {}
        ports = [p for _, p in self.parts.inputs]
        for data, port in self.parts.inputs:
            names[(data, port)] = port if ports.count(port) == 1 else f"{data}_{port}"
        for nid in self.parts.order:
            outputs = self.c.report.specs[nid].outputs
            short = local_name(nid, self.parts.order)
            for p in outputs:
                names[(nid, p.name)] = short if len(outputs) == 1 else f"{short}_{p.name}"
        out, used = {}, set(taken)
        for key, text in names.items():
            name = identifier(text)
            while name in used:
                name += "_"
            used.add(name)
            out[key] = name
        return out

    # -- the class -------------------------------------------------------------------------

    def _class_lines(self) -> list[str]:
        has_predict = bool(self.parts.predict)
        what = "`forward` predicts, `losses` scores" if has_predict else "`losses` scores"
        lines = [f"class {self.name}(nn.Module):",
                 *docstring(f"The graph '{self.c.graph.name}': {what}.", 4),
                 "", "    def __init__(self):", "        super().__init__()"]
        attrs = [code for code in self.blocks.values() if not code.inline]
        for code in attrs:
            lines += ["        " + line for line in code.init]
        lines += ["        " + line for line in self._ties()]
        for nid in self.parts.order:
            if self.c.report.specs[nid].binds:
                bound = ", ".join(f'"{n}": self.{n}' for n in bound_nodes(self.c, nid))
                lines += call_lines("", f"self.{nid}.bind", ["{" + bound + "}"], 8)
        lines += self._statistics()
        if has_predict:
            lines += ["", *self._forward()]
        if self.preprocess:
            lines += ["", *self._preprocess()]
        lines += ["", *self._losses(has_predict)]
        for o in partial_optimizers(self.c):
            lines += ["", *self._partial_loss(o)]
        return lines

    def _partial_loss(self, o) -> list[str]:
        """Only what optimizer `o`'s loss needs, in nodegraph's order."""
        args = ", ".join(["self", *(self.names[k] for k in self.parts.inputs)])
        body = [*self._statements([step[0] for step in o.plan]),
                f"return {self.names[o.loss_key]}"]
        return [f"    def {partial_method(o.node)}({args}):",
                *docstring(f"The loss '{o.loss_key[0]}' that '{o.node}' minimises, computing "
                           "only what it needs.", 8),
                *("        " + b for b in body)]

    def _forward(self) -> list[str]:
        args = ", ".join(["self", *(self.names[k] for k in self.parts.predict_inputs)])
        heads = [self.names[k] for k in self.parts.heads]
        body = self._statements(self.parts.predict)
        raw = [self.names[k] for k in self.parts.predict_inputs if k in self.preprocess]
        if raw:
            args += ", raw=True"
            body = ["if raw:", f"    {', '.join(raw)} = self.{self.preprocess_name}("
                    f"{', '.join(raw)})", *body]
        if len(heads) == 1 and body and body[-1].startswith(f"{heads[0]} = "):
            body[-1] = "return " + body[-1].split(" = ", 1)[1]  # return the last value directly
        elif len("        return " + ", ".join(heads)) <= LINE:
            body.append("return " + ", ".join(heads))
        else:  # many heads (a detector's boxes, scores, labels, masks): one per line
            body += ["return (", *(f"    {h}," for h in heads), ")"]
        which = ", ".join(f"'{self.head_name(k)}'" for k in self.parts.heads)
        doc = f"The output of {which}." if len(heads) == 1 else \
            f"The outputs of {which}, in this order."
        if raw:
            doc += (f" {', '.join(raw)} raw, as `{self.preprocess_name}` takes "
                    f"{'it' if len(raw) == 1 else 'them'}; raw=False: already preprocessed "
                    "(as the training data is).")
        return [f"    def forward({args}):", *docstring(doc, 8), *("        " + b for b in body)]

    def _losses(self, has_predict: bool) -> list[str]:
        args = ", ".join(["self", *(self.names[k] for k in self.parts.inputs)])
        body = []
        if self._interleaved():  # the blocks in nodegraph's order, so random draws agree
            body += self._statements(self.parts.order)
        elif has_predict:
            heads = [self.names[k] for k in self.parts.heads]
            call = "self(" + ", ".join(self.names[k] for k in self.parts.predict_inputs) + (
                ", raw=False)" if self.preprocess else ")")
            body.append(f"{', '.join(heads)} = {call}")
        if not self._interleaved():
            body += self._statements(self.parts.scoring)
        losses = [f'"{n}": {self.names[k]}' for n, k in self.parts.losses.items()]
        outputs = [f'"{self.head_name(k)}": {self.names[k]}'
                   for k in [*self.parts.heads, *self.parts.read]]
        one = "return {" + ", ".join(losses) + "}, {" + ", ".join(outputs) + "}"
        if len(one) + 8 <= LINE:
            body.append(one)
        else:  # one entry a line
            body += ["losses = {", *(f"    {x}," for x in losses), "}",
                     "outputs = {", *(f"    {x}," for x in outputs), "}",
                     "return losses, outputs"]
        return [f"    def losses({args}):",
                '        """Each loss by node, and the outputs they score (metrics read them)."""',
                *("        " + b for b in body)]

    def _statistics(self) -> list[str]:
        """The data blocks' normalisation as constants of the class (not weights: no
        state dict key), for `preprocess`."""
        lines = []
        for key, p in self.preprocess.items():
            if p.centre is None or p.scale is None:
                continue
            lines += [f"# '{key[0]}' scaled '{key[1]}' as (raw - centre) / scale, with",
                      "# these statistics of its training split"]
            for stat, t in (("centre", p.centre), ("scale", p.scale)):
                lines += _literal_lines(f"self.{self.names[key]}_{stat}", t)
        return ["        " + line for line in lines]

    def _preprocess(self) -> list[str]:
        """`preprocess`: what the network reads, from raw inputs (see
        `nodegraph.runtime.preprocess`), in plain torch and torchvision's v2 transforms."""
        names = [self.names[k] for k in self.parts.predict_inputs if k in self.preprocess]
        doc, body = [], []
        for key, p in self.preprocess.items():
            x = self.names[key]
            image = p.image
            if image is not None:
                doc.append(f"`{x}`: photos decoded at {image.height} x {image.width} "
                           f"({image.resize_text()}), as uint8 (N, H, W, {image.channels}) "
                           f"or float (N, {image.channels}, H, W) in [0, 1].")
                body += [f"if {x}.dtype == torch.uint8:  # decoded 8-bit photos",
                         f"    {x} = {x}.permute(0, 3, 1, 2).to(torch.float32) / 255.0"]
                if image.flat:
                    body += [f"elif {x}.ndim == 2:  # one row per sample",
                             f"    {x} = {x}.reshape({x}.shape[0], {image.channels}, "
                             f"{image.height}, {image.width})"]
                if image.script:
                    body.append("from torchvision.transforms import v2  # (load_torchvision "
                                "made it importable)")
                    body += [f"{x} = {step}({x})" for step in image.script]
                if image.flat:
                    body.append(f"{x} = {x}.reshape({x}.shape[0], -1)")
            else:
                doc.append(f"`{x}`: raw values, as the data files hold them.")
            if p.centre is not None:
                body.append(f"{x} = (({x} - self.{x}_centre.to({x}.device)) / "
                            f"self.{x}_scale.to({x}.device)).to({x}.dtype)")
        body.append(f"return {', '.join(names)}")
        text = ("What the network reads, from raw inputs, as nodegraph's data block made its "
                "values: " + " ".join(doc))
        return [f"    def {self.preprocess_name}(self, {', '.join(names)}):",
                *docstring(text, 8), *("        " + b for b in body)]

    def _interleaved(self) -> bool:
        """True when nodegraph runs some scoring block before a predicting one: `losses`
        then repeats the whole order instead of calling `forward` first."""
        position = {n: i for i, n in enumerate(self.parts.order)}
        first_scoring = min((position[n] for n in self.parts.scoring), default=len(position))
        return any(position[n] > first_scoring for n in self.parts.predict)

    def _single(self, nid: str) -> bool:
        return len(self.c.report.specs[nid].outputs) == 1

    def head_name(self, key: Key) -> str:
        return key[0] if self._single(key[0]) else f"{key[0]}.{key[1]}"

    def _statements(self, nodes: list[str]) -> list[str]:
        lines = []
        for nid in nodes:
            _, _, in_keys, out_keys = self.c.module._steps[nid]
            args = [self.names[k] if k is not None else "None" for k in in_keys]
            targets = ", ".join(self.names[k] for k in out_keys)
            code = self.blocks[nid]
            if code.inline:
                lines.append(f"{targets} = {self.expression(nid, args)}")
            else:
                lines += _body_lines(targets, f"self.{code.alias or nid}", args)
        return lines

    def expression(self, nid: str, args: list[str]) -> str:
        text = self.blocks[nid].template
        if text is None:
            raise Unexportable(f"internal error: '{nid}' is not written inline")
        for i, arg in enumerate(args):
            text = text.replace(placeholder(i), arg)
        return text

    # -- the checks ------------------------------------------------------------------------

    def check(self, namespace: dict[str, Any], seed: int, rng: torch.Tensor,
              initial: dict[str, torch.Tensor]) -> dict[str, dict[str, torch.Tensor]]:
        """Build the written class and hold it to the compiled graph: the same initial
        weights from the same seed, the same outputs block by block. `rng` is the random
        state compile left, `initial` its initial weights. Returns the values to write as
        literals (set by hand after building, which the same random state shows); raises
        ExportError for the rest."""
        torch.manual_seed(seed)
        model = namespace[self.name]()
        fixups = self._check_weights(model, initial,
                                     bool(torch.equal(torch.get_rng_state(), rng)))
        if not fixups:
            model.load_state_dict(initial, strict=False)
            self._check_outputs(model, namespace)
            self._check_preprocess(model)
        if self.problems:
            raise unexportable(self.problems)
        return fixups

    def _check_weights(self, model: nn.Module, expected: dict[str, torch.Tensor],
                       same_draws: bool) -> dict[str, dict[str, torch.Tensor]]:
        got = model.state_dict()
        for key in sorted(set(expected) ^ set(got)):
            node = key.split(".", 1)[0]
            side = "nodegraph's" if key in expected else "the exported"
            self.problems.setdefault(node, f"the weight '{key}' exists only in {side} module")
        fixups: dict[str, dict[str, torch.Tensor]] = {}
        by_node: dict[str, list[str]] = {}  # one pass over the keys, not one per node
        for k in expected:
            if k in got:
                by_node.setdefault(k.split(".", 1)[0], []).append(k)
        for nid in self.parts.order:
            keys = by_node.get(nid, [])
            wrong = [k for k in keys if expected[k].shape != got[k].shape
                     or not _close(expected[k], got[k])]
            if not wrong:
                continue
            big = [k for k in wrong if expected[k].numel() > MAX_TENSOR_LITERAL]
            if same_draws and not big and nid not in self.fixups:
                fixups[nid] = {k.split(".", 1)[1]: expected[k] for k in wrong}
                continue
            self.problems.setdefault(nid, "built from the same seed, its exported code gives "
                                     "other initial weights than nodegraph's"
                                     + (" (set after building, and too many to write out)"
                                        if same_draws and big else ""))
            return {}  # every later block draws from a shifted random stream
        return fixups

    def _check_outputs(self, model: nn.Module, namespace: dict[str, Any]) -> None:
        values = sample_inputs(self.c)
        model.eval()
        was_training = self.c.module.training
        self.c.module.eval()
        try:
            with torch.no_grad():
                for i, (nid, module, in_keys, out_keys) in enumerate(self.c.module.full_plan):
                    args = [None if k is None else values.get(k) for k in in_keys]
                    torch.manual_seed(i)
                    try:
                        expected = module(*args)
                    except Exception as e:
                        raise NodeRuntimeError(nid, "fails on the first rows of the training "
                                               f"data: {type(e).__name__}: {e}") from e
                    torch.manual_seed(i)
                    got = self._run_block(nid, model, namespace, args)
                    if not _close(expected, got):
                        self.problems.setdefault(nid, "its exported code computes other "
                                                 "numbers than the block")
                    outs = (expected,) if len(out_keys) == 1 else tuple(expected)
                    values.update(zip(out_keys, outs, strict=True))
        finally:
            self.c.module.train(was_training)

    def _check_preprocess(self, model: nn.Module) -> None:
        """The written `preprocess` gives what nodegraph's does, on raw inputs made from
        the first rows of the training data (random photos for an image port)."""
        if not self.preprocess:
            return
        sample = sample_inputs(self.c)
        raw = {k: raw_example(sample[k], p) for k, p in self.preprocess.items()}
        try:
            with torch.no_grad():
                got = getattr(model, self.preprocess_name)(*raw.values())
        except Exception as e:
            self.problems.setdefault(None, f"the exported preprocess fails: "
                                     f"{type(e).__name__}: {first_line(e)}")
            return
        got = got if isinstance(got, tuple) else (got,)
        for (key, p), value in zip(self.preprocess.items(), got, strict=True):
            with torch.no_grad():
                want = p(raw[key])
            if not _close(want, value):
                self.problems.setdefault(key[0], "the exported preprocess computes other "
                                         f"values for '{key[1]}' than nodegraph's")

    def _run_block(self, nid: str, model: nn.Module, namespace: dict[str, Any], args: list):
        try:
            code = self.blocks[nid]
            if not code.inline:
                return getattr(model, code.alias or nid)(*args)
            names = [placeholder(i) for i in range(len(args))]
            fn = eval(f"lambda {', '.join(names)}: ({self.blocks[nid].template})", namespace)
            return fn(*args)
        except Exception as e:
            self.problems.setdefault(nid, f"its exported code fails: {type(e).__name__}: "
                                     f"{first_line(e) if str(e).strip() else ''}")
            return None


def _in_dtype(call: Call, dtype: torch.dtype) -> tuple[Call, Callable[[str], list[str]]]:
    """`call` building its weights in `dtype` (torch's `dtype=` argument where the
    constructor takes one), and the line that casts the module after it where it does not.
    float32, every old graph's, changes nothing."""
    if dtype == torch.float32:
        return call, lambda target: []
    if "dtype" in call.args or _takes_dtype(call.cls):  # a declared call leaves it out
        return replace(call, args={**call.args, "dtype": dtype}), lambda target: []
    return call, lambda target: [f"{target}.to({dtype})  # the graph's dtype"]


def _takes_dtype(fn: Callable[..., Any]) -> bool:
    try:
        return "dtype" in inspect.signature(fn).parameters
    except (TypeError, ValueError):  # a builtin without a signature
        return False


def _literal_lines(target: str, t: torch.Tensor) -> list[str]:
    """``target = torch.tensor([...])`` wrapped to the line length (any size: statistics
    are constants of the class, not a constructor's arguments)."""
    import textwrap

    from nodegraph.interop.export.source import _float32_literal

    t = t.detach().cpu()
    values = _float32_literal(t) if t.dtype == torch.float32 else repr(t.tolist())
    dtype = "" if t.dtype == torch.float32 else f", dtype={t.dtype}"
    text = f"{target} = torch.tensor({values}{dtype})"
    if len(text) + 8 <= LINE:
        return [text]
    wrapped = textwrap.wrap(values, LINE - 12, break_long_words=False,
                            break_on_hyphens=False)
    wrapped[-1] += f"{dtype})"
    return [f"{target} = torch.tensor(", *("    " + w for w in wrapped)]


def _body_lines(lhs: str, callee: str, args: list[str], extra: int = 0) -> list[str]:
    """`call_lines` for a method body (8 spaces in), returned without those 8 spaces."""
    return [line[8:] for line in call_lines(lhs, callee, args, 8 + extra)]


def sample_inputs(compiled: Compiled, rows: int = SAMPLE_ROWS) -> dict[Key, torch.Tensor]:
    """The first training batch of every data block (unshuffled, at most `rows` rows
    unless the data comes whole, as a graph's nodes do), keyed (node, port)."""
    out = {}
    for nid, ds in compiled.datasets.items():
        batch = next(ds.batches("train"), {})
        whole = ds.batch_size == 0
        out.update({(nid, port): t if whole else t[:rows] for port, t in batch.items()})
    return out


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, tuple | list) and isinstance(b, tuple | list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        if torch.equal(a, b):  # one cheap pass, and the usual case for weights
            return True
        if not a.dtype.is_floating_point:
            return False
        return bool(torch.allclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True))
    return a is b or a == b
