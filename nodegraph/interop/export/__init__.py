"""Export a graph to plain PyTorch: Python source, ONNX, or its weights.

`to_python` writes one file with the model as an `nn.Module` class and the training run as
a script (`export.python`); `to_onnx` writes the forward graph in inference mode
(`export.onnx`); `to_weights` writes trained weights keyed ``node.param``
(`export.weights`). Blocks that cannot be exported are reported by node, with the reason,
as an `ExportError`. The command line is in `export.command`.
"""

from nodegraph.interop.export.model import ExportError
from nodegraph.interop.export.onnx import OnnxExport, to_onnx
from nodegraph.interop.export.python import PythonExport, to_python
from nodegraph.interop.export.weights import to_weights

__all__ = ["ExportError", "OnnxExport", "PythonExport", "to_onnx", "to_python", "to_weights"]
