"""A graph's summary table, as torchinfo prints a model's: one row per node.

    >>> nodegraph.summary(g)    # or model.summary() for a trained model
    node    block              output shape   params  trainable  memory
    data    data.XOR           x (N, 2) ...        0             ...
    ...
    total                                         17         17  2.1 kB

Columns: the node id, its block type, the shape of each output (N is the batch), its
parameter count, how many of them train (a model's: those with `requires_grad`; a graph's:
those of nodes upstream of an optimizer's loss), and the bytes it holds for one batch
(weights, buffers and activations, from validation's memory estimate). Text for a terminal
(`str`), HTML for a notebook (`_repr_html_`), rows for a program (`rows`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape
from typing import Any

from nodegraph.kinds.footprint import size_text
from nodegraph.model.errors import not_a_graph
from nodegraph.model.graph import Graph

COLUMNS = ("node", "block", "output shape", "params", "trainable", "memory")


@dataclass
class Summary:
    """The table: `rows` of dicts keyed by `COLUMNS`, and the totals."""

    name: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    params: int = 0
    trainable: int = 0
    memory: int | None = None

    def _cells(self) -> list[list[str]]:
        out = [[r["node"], r["block"], r["output shape"], f"{r['params']:,}",
                f"{r['trainable']:,}", size_text(r["memory"]) if r["memory"] else ""]
               for r in self.rows]
        out.append(["total", "", "", f"{self.params:,}", f"{self.trainable:,}",
                    size_text(self.memory) if self.memory else ""])
        return out

    def __str__(self) -> str:
        cells = [list(COLUMNS), *self._cells()]
        widths = [min(48, max(len(row[i]) for row in cells)) for i in range(len(COLUMNS))]
        right = {3, 4, 5}

        def line(row: list[str]) -> str:
            return "  ".join((c[:widths[i]].rjust(widths[i]) if i in right
                              else c[:widths[i]].ljust(widths[i]))
                             for i, c in enumerate(row)).rstrip()

        rule = "-" * (sum(widths) + 2 * (len(widths) - 1))
        body = [line(r) for r in cells[1:-1]]
        return "\n".join([f"{self.name}", line(cells[0]), rule, *body, rule, line(cells[-1])])

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{escape(c)}</th>" for c in COLUMNS)
        rows = "".join("<tr>" + "".join(
            f"<td style='text-align:{'right' if i >= 3 else 'left'}'>{escape(c)}</td>"
            for i, c in enumerate(r)) + "</tr>" for r in self._cells())
        return (f"<div><b>{escape(self.name)}</b><table class='nodegraph-summary'>"
                f"<thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table></div>")


def summary(graph: Graph, report: Any = None, module: Any = None) -> Summary:
    """The summary of `graph` from its validation `report` (validated here when not given),
    with the parameter counts of a compiled `module` when one is given."""
    if not isinstance(graph, Graph):
        if type(graph).__name__ == "Model":  # a trained model's summary is its own
            return graph.summary()
        raise not_a_graph("summary", graph)
    if report is None:
        from nodegraph.check.validate import validate

        report = validate(graph)
    owned = _module_counts(module) if module is not None else None
    trains = _trained_nodes(graph, report)
    per_node = report.memory.nodes if report.memory is not None else {}
    table = Summary(graph.name)
    order = report.order or list(graph.nodes)
    for node in order:
        spec = report.specs.get(node)
        outs = ", ".join(f"{p.name} {report.shape_text(node, p.name)}" for p in spec.outputs
                         if (node, p.name) in report.outputs) if spec else ""
        if owned is not None:
            params, trainable = owned.get(node, (0, 0))
        else:
            params = report.param_counts.get(node, 0)
            trainable = params if node in trains else 0
        table.rows.append({"node": node, "block": graph.nodes[node].type if node in graph
                           else (spec.id if spec else "?"),
                           "output shape": outs, "params": params, "trainable": trainable,
                           "memory": per_node.get(node)})
    table.params = sum(r["params"] for r in table.rows)
    table.trainable = sum(r["trainable"] for r in table.rows)
    table.memory = report.memory.total if report.memory is not None else None
    return table


def _module_counts(module: Any) -> dict[str, tuple[int, int]]:
    """(parameters, trainable ones) per node of a compiled module, each tensor counted
    once (at the first node holding it, for shared weights)."""
    seen: set[int] = set()
    out: dict[str, tuple[int, int]] = {}
    for name, p in module.named_parameters(remove_duplicate=False):
        node = name.removeprefix("blocks.").split(".", 1)[0]
        if id(p) in seen:
            continue
        seen.add(id(p))
        total, trainable = out.get(node, (0, 0))
        out[node] = (total + p.numel(), trainable + (p.numel() if p.requires_grad else 0))
    return out


def _trained_nodes(graph: Graph, report: Any) -> set[str]:
    """Nodes upstream of an optimizer's loss: what training would update."""
    optimizers = [n for n, s in report.specs.items() if s.kind == "optimizer"]
    run_graph = report.flat.graph if report.flat else graph
    ends = [e.src for o in optimizers if o in run_graph
            for e in run_graph.edges_into(o)]
    return run_graph.upstream(ends) if ends else set()
