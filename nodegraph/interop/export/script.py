"""The training half of an exported file: what `nodegraph run` does, as a plain loop.

It repeats the trainer step for step, so the same seed gives the same loss curve: the data
of each block (see `export.data`), the model built right after ``torch.manual_seed(seed)``,
each optimizer with its parameter groups and schedule (as recorded while compiling), the
shuffle order from a ``torch.Generator`` seeded like the trainer's, every loss summed per
sample and averaged per epoch (``loss`` being their total unless a node is called so),
the metrics, the evaluation of the validation split in eval mode, early stopping, and the
final numbers of every split. What the graph does not use is not written.
"""

from __future__ import annotations

from dataclasses import dataclass

from nodegraph.interop.export.data import DataCode
from nodegraph.interop.export.model import (
    ModelWriter,
    Parts,
    bound_nodes,
    partial_method,
    partial_optimizers,
)
from nodegraph.interop.export.record import Recorder
from nodegraph.interop.export.source import Source
from nodegraph.interop.export.stream import BATCHES_STREAMED
from nodegraph.interop.export.syntax import (
    LINE,
    Unexportable,
    attribute_path,
    call_lines,
    identifier,
    reflow,
)
from nodegraph.kinds.streamed import is_streamed
from nodegraph.model import settings
from nodegraph.runtime.compile import Compiled, Key, OptimizerRun
from nodegraph.runtime.render import format_stats

I1, I2, I3, I4 = (" " * n for n in (4, 8, 12, 16))


@dataclass
class Names:
    """The script's local names for the things it makes."""

    optimizers: dict[str, str]  # optimizer node -> variable
    schedulers: dict[str, str]
    batches: dict[str, str]  # data node -> loop variable holding its batch


class ScriptWriter:
    """Writes the constants, helpers and `train`/`main` functions of one compiled graph."""

    def __init__(self, compiled: Compiled, recorder: Recorder, source: Source, parts: Parts,
                 model: ModelWriter, data: list[DataCode], opts: dict, source_name: str):
        self.c, self.recorder, self.source, self.parts = compiled, recorder, source, parts
        self.model, self.data, self.opts, self.source_name = model, data, opts, source_name
        self.problems: dict[str | None, str] = {}
        single = len(compiled.optimizers) == 1
        self.names = Names(
            {o.node: "optimizer" if single else identifier(o.node) for o in compiled.optimizers},
            {o.node: "scheduler" if single else identifier(f"{o.node}_schedule")
             for o in compiled.optimizers if o.scheduler is not None},
            {d.node: "batch" if len(data) == 1 else identifier(f"{d.node}_batch")
             for d in data})

    # -- the parts of the file -----------------------------------------------------------

    def constants(self) -> list[str]:
        device = self.opts["device"]
        device_text = ('"cuda" if torch.cuda.is_available() else "cpu"' if device == "auto"
                       else repr(device))
        lines = [f"SEED = {self.opts['seed']}", f"EPOCHS = {self.opts['epochs']}",
                 f"DEVICE = {device_text}"]
        for d in self.data:
            size = self.c.datasets[d.node].batch_size
            lines.append(f"{self._batch_constant(d.node)} = {size}"
                         + ("  # 0: the whole split in one step" if size == 0 else ""))
        lines.append(f"EVAL_BATCH_SIZE = {self.opts['eval_batch_size']}")
        lines += self._precision_constants()
        objective = [o.loss_key[0] for o in self.c.optimizers] or list(self.parts.losses)
        objective_line = f"OBJECTIVE = {self.source.value(tuple(objective))}"
        comment = "# what the optimizers minimise, reported as `loss`"
        lines += [f"LOSSES = {self.source.value(tuple(self.parts.losses))}",
                  *([f"{objective_line}  {comment}"]
                    if len(objective_line) + len(comment) + 2 <= LINE
                    else [comment, objective_line])]
        if self._tracks_best():
            key = self.opts["monitor"] or ("val.loss" if self._has_val() else "train.loss")
            rises = settings.monitor_rises(key, self.opts["mode"])
            lines += [f"MONITOR = {key!r}  # early stopping watches it; it should "
                      + ("rise" if rises else "fall"),
                      f"PATIENCE = {self.opts['patience']!r}",
                      f"MIN_DELTA = {self.opts['min_delta']!r}"]
        return lines

    # -- mixed precision and accumulation (training.precision, training.accumulate) -------

    @property
    def _mixed(self) -> bool:
        """True when the step is not the plain float32 one (`nodegraph.runtime.precision`)."""
        return self.opts["precision"] != "32" or self.opts["accumulate"] > 1

    def _precision_constants(self) -> list[str]:
        if not self._mixed:
            return []
        dtype = {"bf16-mixed": "torch.bfloat16", "16-mixed": "torch.float16"}.get(
            self.opts["precision"])
        lines = [f"PRECISION = {dtype}  # training.precision {self.opts['precision']}: "
                 "the forward under autocast" if dtype else
                 "PRECISION = None  # training.precision 32: no autocast"]
        if self.opts["accumulate"] > 1:
            steps = self.c.datasets[self.data[0].node].num_batches("train")
            lines += [f"ACCUMULATE = {self.opts['accumulate']}  # batches per optimizer step",
                      f"STEPS = {steps}  # batches per epoch"]
        return lines

    def _autocast_helper(self) -> list[str]:
        if not self._mixed:
            return []
        return ["def autocast():",
                f'{I1}"""The forward in PRECISION under torch.autocast (nothing for None)."""',
                f"{I1}if PRECISION is None:",
                f"{I2}return contextlib.nullcontext()",
                f"{I1}return torch.autocast(torch.device(DEVICE).type, dtype=PRECISION)", ""]

    def _mixed_step(self, o: OptimizerRun, call: list[str], loss: str) -> list[str]:
        """The step under autocast, the scaler (16-mixed) and accumulation, as
        `nodegraph.runtime.precision.Precision.step` takes it."""
        opt = self.names.optimizers[o.node]
        accumulate = self.opts["accumulate"] > 1
        scaler = self.opts["precision"] == "16-mixed"
        lines = ([f"{I3}if (index - 1) % ACCUMULATE == 0:",
                  f"{I4}{opt}.zero_grad(set_to_none=True)"] if accumulate else [])
        lines += [f"{I3}with autocast():",
                  *_shift([line for part in call for line in part.split("\n")], 4)]
        if accumulate:
            lines += [f"{I3}window = min(ACCUMULATE, STEPS - (index - 1) // ACCUMULATE "
                      "* ACCUMULATE)",
                      f"{I3}objective = {loss} * (1 / window) if window > 1 else {loss}"]
        else:
            lines += [f"{I3}{opt}.zero_grad(set_to_none=True)", f"{I3}objective = {loss}"]
        lines.append(f"{I3}" + ("scaler.scale(objective).backward()" if scaler
                                else "objective.backward()"))
        update = []
        if o.clip is not None:
            if scaler:
                update.append(f"{I3}scaler.unscale_({opt})")
            update.append(f"{I3}torch.nn.utils.clip_grad_norm_({self._params(o.params)}, "
                          f"{o.clip!r})")
        update += ([f"{I3}scaler.step({opt})", f"{I3}scaler.update()"] if scaler
                   else [f"{I3}{opt}.step()"])
        if o.scheduler is not None and o.per_step:
            update.append(f"{I3}{self.names.schedulers[o.node]}.step()")
        if accumulate:
            lines += [f"{I3}if index % ACCUMULATE == 0 or index == STEPS:", *_shift(update, 4)]
        else:
            lines += update
        return lines

    def _batch_constant(self, node: str) -> str:
        return "BATCH_SIZE" if len(self.data) == 1 else f"{identifier(node).upper()}_BATCH_SIZE"

    def helpers(self) -> list[str]:
        """Functions the loop calls: batches, loss means, metrics, evaluation."""
        self.source.section = "training"
        self.source.bind("format_stats", format_stats)
        out = [self._batches(), MEAN_LOSSES]
        if self._mixed:
            self.source.add_import("contextlib")
            out.append("\n".join(self._autocast_helper()[:-1]))
        if self.c.metrics:
            try:
                out += [self._update_metrics(), METRIC_VALUES]
            except Unexportable as e:
                self.problems[None] = str(e)
        out.append(self._evaluate())
        return out

    @property
    def _streamed(self) -> bool:
        """Some data is read per sample while training (`export.stream`)."""
        return any(is_streamed(self.c.datasets[d.node]) for d in self.data)

    def _batches(self) -> str:
        if not self._streamed:
            return BATCHES
        head, _, rest = BATCHES.partition('"""\n')
        head, _, doc = head.rpartition("\n")
        return head + "\n" + doc + '"""\n' + BATCHES_STREAMED + rest

    def _update_metrics(self) -> str:
        lines = ["def update_metrics(metrics, outputs, " + self._batch_params() + "):",
                 f'{I1}"""Feed each metric the batch\'s values, as the trainer does."""']
        for m in self.c.metrics:
            lines += call_lines("", f'metrics["{m.node}"].update',
                                [self._value(k) for k in m.keys], len(I1))
        return "\n".join(lines)

    def _batch_params(self) -> str:
        return ", ".join(self.names.batches.values())

    def _value(self, key: Key | None) -> str:
        """A metric input inside the loop: a batch column or an output of `losses`."""
        if key is None:
            return "None"
        if key[0] in self.names.batches:
            return f'{self.names.batches[key[0]]}["{key[1]}"]'
        if key in self.parts.heads or key in self.parts.read:
            return f'outputs["{self.model.head_name(key)}"]'
        raise Unexportable(f"a metric reads {key[0]}.{key[1]}, which `losses` does not return")

    def _outputs(self) -> str:
        """The name the loop gives the outputs of `losses`: only metrics read them."""
        return "outputs" if self.c.metrics else "_"

    def _model_args(self) -> str:
        return ", ".join(f'{self.names.batches[d]}["{p}"]' for d, p in self.parts.inputs)

    def _losses_call(self, indent: str) -> str:
        """``losses, outputs = model.losses(...)``, wrapped when a model has many inputs."""
        args = [f'{self.names.batches[d]}["{p}"]' for d, p in self.parts.inputs]
        return "\n".join(call_lines(f"losses, {self._outputs()}", "model.losses", args,
                                     len(indent)))

    def _first_column(self) -> str:
        first = self.data[0]
        port = next(iter(self.c.datasets[first.node].ports))  # a list, or a streamed dict
        return f'{self.names.batches[first.node]}["{port}"]'

    def _loop(self, split: str, size: str | None, shuffle: str | None) -> str:
        """`for batch in batches(...)` over the split expression `split`, or a zip of one
        stream per data block; `size` None means each block's own batch size."""
        streams = [f'batches(data["{d.node}"][{split}], {size or self._batch_constant(d.node)}'
                   + (f", {shuffle})" if shuffle else ")") for d in self.data]
        if len(streams) == 1:
            return f"for batch in {streams[0]}:"
        return f"for {self._batch_params()} in zip({', '.join(streams)}):"

    def _evaluate(self) -> str:
        metrics = bool(self.c.metrics)
        lines = ["@torch.no_grad()",
                 "def evaluate(model, data, split" + (", metrics" if metrics else "") + "):",
                 f'{I1}"""Mean losses' + (" and metrics" if metrics else "")
                 + ' over one split, in evaluation mode."""',
                 f"{I1}model.eval()", f"{I1}totals, count = dict.fromkeys(LOSSES, 0.0), 0"]
        if metrics:
            lines += [f"{I1}for metric in metrics.values():", f"{I2}metric.reset()"]
        call = self._losses_call(I2)
        if self._mixed:
            call = f"{I2}with autocast():\n" + "\n".join(_shift(call.split("\n"), 4))
        lines += [I1 + self._loop("split", "EVAL_BATCH_SIZE", None),
                  call,
                  f"{I2}n = len({self._first_column()})",
                  f"{I2}count += n",
                  f"{I2}for name, value in losses.items():",
                  f"{I3}totals[name] += value.item() * n"]
        if metrics:
            lines.append(f"{I2}update_metrics(metrics, outputs, {self._batch_params()})")
        lines += [f"{I1}model.train()",
                  f"{I1}return " + ("{**mean_losses(totals, count), **metric_values(metrics)}"
                                    if metrics else "mean_losses(totals, count)")]
        return "\n".join(lines)

    # -- train ---------------------------------------------------------------------------

    def train_function(self) -> str:
        staged = bool(self.opts["stages"])
        body = [f'{I1}"""Train as `nodegraph run {self.source_name}` does.',
                "",
                f'{I1}Returns the model and {{"history": [...], "final": {{...}}}}, as '
                '`--metrics-out` writes them."""',
                f"{I1}data = {{" + ", ".join(f'"{d.node}": {d.function}()' for d in self.data)
                + "}",
                *self._to_device(),
                f"{I1}torch.manual_seed(SEED)  # the weights are drawn right after seeding, "
                "as nodegraph does",
                f"{I1}model = {self.model.name}().to(DEVICE)"]
        for o in self.c.optimizers:
            body += self._optimizer(o)
        if self.opts["precision"] == "16-mixed":
            body.append(f"{I1}scaler = torch.amp.GradScaler(torch.device(DEVICE).type)  "
                        "# 16-mixed: loss scaling")
        if staged:
            body.append(f"{I1}optimizers = {{" + ", ".join(
                f'"{o.node}": {self.names.optimizers[o.node]}' for o in self.c.optimizers) + "}")
        if self.c.metrics:
            body += self._metrics()
        # streamed data draws each epoch's seed from it even unshuffled (its augmentation)
        shuffle = ("shuffle" if self.c.datasets[self.data[0].node].shuffle or self._streamed
                   else None)
        if shuffle:
            body.append(f"{I1}shuffle = torch.Generator().manual_seed(SEED)  # the trainer's "
                        "shuffle order")
        epoch = self._epoch(shuffle, staged)
        best = "best, best_epoch, since_best, best_state = None, None, 0, None"
        if not staged:
            if self._tracks_best():
                body.append(I1 + best)
            body += [f"{I1}history = []", f"{I1}for epoch in range(1, epochs + 1):", *epoch]
        else:
            body += [f"{I1}epochs = sum(stage[1] for stage in STAGES)",
                     f"{I1}history, epoch = [], 0",
                     f"{I1}for stage, stage_epochs, active, frozen in STAGES:",
                     f"{I2}fixed = [p for node in frozen "
                     "for p in getattr(model, node).parameters()",
                     f"{I2}         if p.requires_grad]",
                     f"{I2}for p in fixed:  # the stage's frozen blocks",
                     f"{I3}p.requires_grad_(False)",
                     *([I2 + best] if self._tracks_best() else []),
                     f"{I2}for _ in range(stage_epochs):",
                     f"{I3}epoch += 1",
                     *_shift(epoch, 4),
                     f"{I2}for p in fixed:", f"{I3}p.requires_grad_(True)"]
        body += self._finish()
        head = "def train(log=print):" if staged else "def train(epochs=EPOCHS, log=print):"
        return "\n".join([head, *body])

    def _to_device(self) -> list[str]:
        """The lines moving in-memory splits to DEVICE (streams move each batch)."""
        if self._streamed:
            return [f"{I1}data = {{node: {{split: part if isinstance(part, Stream)  # per batch",
                    f"{I1}                 else {{port: t.to(DEVICE) for port, t in part.items()}}",
                    f"{I1}                 for split, part in splits.items()}}",
                    f"{I1}        for node, splits in data.items()}}"]
        return [f"{I1}data = {{node: {{split: {{port: t.to(DEVICE) for port, t in part.items()}}",
                f"{I1}                 for split, part in splits.items()}}",
                f"{I1}        for node, splits in data.items()}}"]

    def _epoch(self, shuffle: str | None, staged: bool) -> list[str]:
        """The body of the epoch loop."""
        body = [f"{I2}model.train()"]
        if staged:
            body += [f"{I2}for node in frozen:  # frozen blocks keep their statistics too",
                     f"{I3}getattr(model, node).eval()"]
        body.append(f"{I2}totals, count = dict.fromkeys(LOSSES, 0.0), 0")
        if self.c.metrics:
            body += [f"{I2}for metric in metrics.values():", f"{I3}metric.reset()"]
        loop = self._loop('"train"', None, shuffle)
        if self._mixed and self.opts["accumulate"] > 1:  # the batch's number in its epoch
            names, _, stream = loop.removeprefix("for ").removesuffix(":").partition(" in ")
            names = f"({names})" if "," in names else names
            loop = f"for index, {names} in enumerate({stream}, 1):"
        body.append(I2 + loop)
        if any(o.closure for o in self.c.optimizers):
            body.append(f"{I3}losses, {self._outputs()} = {{}}, {{}}")
        for o in self.c.optimizers:
            step = self._step(o)
            body += [f'{I3}if "{o.node}" in active:', *_shift(step, 4)] if staged else step
        body += [f"{I3}n = len({self._first_column()})", f"{I3}count += n",
                 f"{I3}for name, value in losses.items():",
                 f"{I4}totals[name] += value.item() * n"]
        if self.c.metrics:
            body += [f"{I3}with torch.no_grad():",
                     f"{I4}update_metrics(metrics, outputs, {self._batch_params()})"]
        return body + self._epoch_end(staged)

    def stages(self) -> list[str]:
        """The STAGES constant: name, epochs, optimizers that step, blocks kept fixed."""
        names = [o.node for o in self.c.optimizers]
        lines = ["STAGES = [  # name, epochs, optimizers that step, blocks kept fixed"]
        for i, stage in enumerate(self.opts["stages"]):
            frozen = [self.model.attribute(n) for n in _members(self.c, stage.get("frozen", []))]
            row = (stage.get("name", f"stage {i + 1}"), stage["epochs"],
                   tuple(stage.get("optimizers") or names),
                   tuple(dict.fromkeys(n for n in frozen if n)))
            lines.append(f"    {self.source.value(row)},")
        return [*lines, "]"]

    def _optimizer(self, o: OptimizerRun) -> list[str]:
        name = self.names.optimizers[o.node]
        call = self.recorder.get(o.optimizer)
        if call is None:
            self.problems[o.node] = "its optimizer was not made by a Python constructor call"
            return []
        lines = self._recorded(o.node, name, call, self._param_groups(o, call))
        if o.scheduler is not None and o.schedule_node is not None:  # set together
            sched = self.recorder.get(o.scheduler)
            if sched is None:
                self.problems[o.schedule_node] = "its scheduler was not made by a Python " \
                                                 "constructor call"
            else:
                lines += self._recorded(o.schedule_node, self.names.schedulers[o.node], sched,
                                        {"optimizer": name})
        return lines

    def _recorded(self, node: str, name: str, call, overrides: dict[str, str]) -> list[str]:
        try:
            callee, parts = self.source.call(call, overrides)
        except Unexportable as e:
            self.problems[node] = str(e)
            return []
        return call_lines(name, callee, parts, 4)

    def _param_groups(self, o: OptimizerRun, call) -> dict[str, str]:
        """The optimizer's first argument as code, and the group settings it sets."""
        first = next(iter(call.args))
        groups = call.args[first]
        shared = {k for g in groups for k in g if k != "params"}
        if len(groups) == 1 and all(k in call.args or not groups[0][k] for k in shared):
            for k in shared & set(call.args):
                call.args[k] = groups[0][k]  # the group's value is the one that applies
            return {first: self._params(groups[0]["params"])}
        text = ", ".join("{" + ", ".join([f'"params": {self._params(g["params"], True)}',
                                          *(f'"{k}": {self.source.value(v)}'
                                            for k, v in g.items() if k != "params")]) + "}"
                         for g in groups)
        return {first: f"[{text}]"}

    def _params(self, params: list, as_list: bool = False) -> str:
        """Parameters as code: all of them, whole blocks, or one by one."""
        everything = list(self.c.module.parameters())
        if _same(params, everything):
            return "list(model.parameters())" if as_list else "model.parameters()"
        paths = {id(p): k.removeprefix("blocks.") for k, p in
                 self.c.module.named_parameters(remove_duplicate=False)}
        nodes: list[str] = []
        for p in params:
            node = paths[id(p)].split(".", 1)[0]
            if not nodes or nodes[-1] != node:
                nodes.append(node)
        modules = [self.c.module.module_of(n) for n in nodes]  # each has one: it owns `params`
        whole = [p for m in modules if m is not None for p in m.parameters()]
        if _same(params, whole):
            if len(nodes) == 1 and not as_list:
                return f"model.{nodes[0]}.parameters()"
            return "[" + ", ".join(f"*model.{n}.parameters()" for n in nodes) + "]"
        return "[" + ", ".join(attribute_path("model", paths[id(p)]) for p in params) + "]"

    def _metrics(self) -> list[str]:
        items = []
        for m in self.c.metrics:
            call = self.recorder.get(m.metric)
            if call is None:
                self.problems[m.node] = "its metric was not made by a Python constructor call"
                continue
            try:
                callee, parts = self.source.call(call)
            except Unexportable as e:
                self.problems[m.node] = str(e)
                continue
            items.append(f'"{m.node}": {callee}({", ".join(parts)})')
        lines = [f"{I1}metrics = {{" + ", ".join(items) + "}"]
        if len(lines[0]) > LINE:  # one entry per line
            lines = [f"{I1}metrics = {{", *(f"{I1}    {item}," for item in items), f"{I1}}}"]
        for m in self.c.metrics:
            if self.c.report.specs[m.node].binds:  # a metric of other blocks' weights
                bound = ", ".join(f'"{n}": model.{n}' for n in bound_nodes(self.c, m.node))
                lines += call_lines("", f'metrics["{m.node}"].bind', ["{" + bound + "}"], 4)
        return lines

    def _step(self, o: OptimizerRun) -> list[str]:
        opt = self.names.optimizers[o.node]
        loss = f'losses["{o.loss_key[0]}"]'
        if o.closure:
            bound = ", ".join(f"{b}={b}" for b in self.names.batches.values())
            lines = ["", f"{I3}def closure(backward=True, {bound}):  # the batch, bound now",
                     f"{I4}nonlocal losses" + (", outputs" if self.c.metrics else ""),
                     f"{I4}{opt}.zero_grad(set_to_none=True)",
                     f"{I4}with torch.enable_grad():",
                     self._losses_call(I4 + "    "),
                     f"{I4}    if backward:",
                     f"{I4}        {loss}.backward()",
                     *([f"{I4}        torch.nn.utils.clip_grad_norm_("
                        f"{self._params(o.params)}, {o.clip!r})"] if o.clip is not None else []),
                     f"{I4}return {loss}", "",
                     f"{I3}{opt}.step(closure)"]
        else:
            if o.node in {p.node for p in partial_optimizers(self.c)}:  # what its loss needs
                loss = "loss"
                lines = [f"{I3}loss = model.{partial_method(o.node)}({self._model_args()})"]
            else:
                lines = [self._losses_call(I3)]
            if self._mixed:
                return self._mixed_step(o, lines, loss)
            lines += [f"{I3}{opt}.zero_grad(set_to_none=True)", f"{I3}{loss}.backward()"]
            if o.clip is not None:
                params = self._params(o.params)
                lines.append(f"{I3}torch.nn.utils.clip_grad_norm_({params}, {o.clip!r})")
            lines.append(f"{I3}{opt}.step()")
        if o.scheduler is not None and o.per_step:
            lines.append(f"{I3}{self.names.schedulers[o.node]}.step()")
        return lines

    def _epoch_end(self, staged: bool) -> list[str]:
        metrics = ", **metric_values(metrics)" if self.c.metrics else ""
        lines = [f"{I2}train = {{**mean_losses(totals, count){metrics}}}"]
        extra = ", metrics" if self.c.metrics else ""
        lines.append(f'{I2}val = evaluate(model, data, "val"{extra})' if self._has_val()
                     else f"{I2}val = {{}}")
        for o in self.c.optimizers:
            if o.scheduler is not None and not o.per_step:
                step = f"{self.names.schedulers[o.node]}.step()"
                lines += [f'{I2}if "{o.node}" in active:', I3 + step] if staged else [I2 + step]
        lr = ", ".join(f'"{o.node}": {self.names.optimizers[o.node]}.param_groups[0]["lr"]'
                       for o in self.c.optimizers)
        if staged:
            lr = 'name: optimizers[name].param_groups[0]["lr"] for name in active'
        stage = ', "stage": stage' if staged and len(self.opts["stages"]) > 1 else ""
        lines += [*(f"{I2}{line}" for line in reflow_assignment("lr", "{" + lr + "}", 8)),
                  f'{I2}history.append({{"epoch": epoch, "train": train, "val": val, "lr": lr'
                  f"{stage}}})",
                  f"{I2}if epoch in (1, epochs) or epoch % max(1, epochs // 20) == 0:",
                  f'{I3}log(f"epoch {{epoch}}/{{epochs}}  train {{format_stats(train)}}"',
                  f'{I3}    + (f"  | val {{format_stats(val)}}" if val else ""))']
        if self._tracks_best():
            lines += [f'{I2}split, _, key = MONITOR.partition(".")',
                      f'{I2}value = {{"train": train, "val": val}}.get(split, {{}}).get(key)',
                      f"{I2}if isinstance(value, float) and math.isfinite(value) and (",
                      f"{I4}best is None or {self._better()}):",
                      f"{I3}best, best_epoch, since_best = value, epoch, 0",
                      f"{I3}best_state = {{k: v.detach().clone() for k, v in "
                      "model.state_dict().items()}",
                      f"{I2}else:", f"{I3}since_best += 1",
                      f"{I2}if PATIENCE is not None and since_best >= PATIENCE:",
                      f'{I3}log(f"early stop after epoch {{epoch}}: {{MONITOR}} has not improved'
                      ' for {PATIENCE} epochs")',
                      f"{I3}break"]
            self.source.add_import("math")
        return lines

    def _better(self) -> str:
        key = self.opts["monitor"] or ("val.loss" if self._has_val() else "train.loss")
        if settings.monitor_rises(key, self.opts["mode"]):
            return "value > best + MIN_DELTA"
        return "value < best - MIN_DELTA"

    def _finish(self) -> list[str]:
        lines = []
        if self._tracks_best() and self.opts["restore_best"]:
            lines += [f"{I1}if best_state is not None:",
                      f"{I2}model.load_state_dict(best_state)",
                      f'{I2}log(f"restored the weights of epoch {{best_epoch}} ({{MONITOR}} = '
                      '{best:.6g})")']
        extra = ", metrics" if self.c.metrics else ""
        splits = [s for s in ("train", "val", "test")
                  if self.c.datasets[self.data[0].node].has(s)]
        lines += [f"{I1}final = {{split: evaluate(model, data, split{extra})",
                  f"{I1}         for split in {self.source.value(tuple(splits))}}}",
                  f'{I1}return model, {{"history": history, "final": final}}']
        return lines

    def _has_val(self) -> bool:
        return self.c.datasets[self.data[0].node].has("val")

    def _tracks_best(self) -> bool:
        return self.opts["patience"] is not None or bool(self.opts["monitor"])

    def main_function(self) -> str:
        self.source.add_import("argparse")
        self.source.add_import("json")
        text = MAIN.format(description=repr(f"Train {self.c.graph.name} as nodegraph does "
                                            "(exported from nodegraph)."))
        if self.opts["stages"]:  # the stages set the epochs
            text = text.replace('    parser.add_argument("--epochs", type=int, default=EPOCHS)\n',
                                "").replace("train(args.epochs)", "train()")
        return text


def reflow_assignment(name: str, value: str, indent: int) -> list[str]:
    """``name = value``, the value spread over lines when too long."""
    return f"{name} = {reflow(value, indent + len(name) + 3)}".split("\n")


def _shift(lines: list[str], by: int) -> list[str]:
    return [" " * by + line if line else line for line in lines]


def _members(c: Compiled, nodes: list[str]) -> list[str]:
    """Node ids as the executed graph knows them: a group instance is its inner nodes."""
    flat = c.report.flat
    return [m for n in nodes for m in ((flat.members(n) if flat else None) or [n])]


def _same(a: list, b: list) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


BATCHES = '''\
def batches(part, batch_size, generator=None):
    """Batches of one split as dicts port -> tensor; shuffled when a generator is given."""
    n = len(next(iter(part.values())))
    size = n if batch_size == 0 else min(batch_size, n)
    order = None
    if generator is not None and n > 1:
        order = torch.randperm(n, generator=generator).to(next(iter(part.values())).device)
    for i in range(0, n, size):
        rows = slice(i, i + size) if order is None else order[i:i + size]
        yield {port: t[rows] for port, t in part.items()}'''

MEAN_LOSSES = '''\
def mean_losses(totals, count):
    """Each loss averaged over the samples, and `loss`, the sum of the optimised ones (unless
    a node is called so)."""
    means = {name: total / count for name, total in totals.items()} if count else {}
    if means and "loss" not in means:
        means = {"loss": sum(means[name] for name in OBJECTIVE if name in means), **means}
    return means'''

METRIC_VALUES = '''\
def metric_values(metrics):
    """Each metric's value; a metric giving several is reported as node.key."""
    out = {}
    for name, metric in metrics.items():
        value = metric.compute()
        if isinstance(value, dict):
            out.update({f"{name}.{key}": v for key, v in value.items()})
        else:
            out[name] = value
    return out'''

MAIN = '''\
def main():
    parser = argparse.ArgumentParser(
        description={description})
    parser.add_argument("--epochs", type=int, default=EPOCHS)
    parser.add_argument("--metrics-out", help="write the history and final numbers as JSON")
    args = parser.parse_args()
    _, result = train(args.epochs)
    for split, stats in result["final"].items():
        print(f"  {{split:<5}} {{format_stats(stats)}}")
    if args.metrics_out:
        with open(args.metrics_out, "w") as f:
            json.dump(result, f, indent=1)'''
