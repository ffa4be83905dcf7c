"""Export a graph to plain PyTorch: Python source, ONNX, or its weights.

`to_python` writes one file with the model as an `nn.Module` class and the training run as
a script (`export.python`); `to_onnx` writes the forward graph in inference mode
(`export.onnx`); `to_weights` writes trained weights keyed ``node.param``
(`export.weights`). Blocks that cannot be exported are reported by node, with the reason,
as an `ExportError`. The command line is in `export.command`.

Each name is imported on first use (PEP 562): `nodegraph.fit` and `predict` import
`export.model` and `export.weights`, and must not pay for the ONNX and Python writers.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nodegraph.interop.export.model import ExportError
    from nodegraph.interop.export.onnx import OnnxExport, to_onnx
    from nodegraph.interop.export.python import PythonExport, to_python
    from nodegraph.interop.export.weights import to_weights

_WHERE = {"ExportError": "model", "OnnxExport": "onnx", "to_onnx": "onnx",
          "PythonExport": "python", "to_python": "python", "to_weights": "weights"}
__all__ = ["ExportError", "OnnxExport", "PythonExport", "to_onnx", "to_python", "to_weights"]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
