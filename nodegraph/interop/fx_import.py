"""The importer's former path, kept for callers: see `nodegraph.interop.importing`."""

from nodegraph.interop.importing.blocks import function_blocks, module_block
from nodegraph.interop.importing.build import Imported, import_graph, import_module
from nodegraph.interop.importing.fxtrace import trace
from nodegraph.interop.importing.naming import callable_path
from nodegraph.interop.importing.probing import probe
from nodegraph.interop.importing.weights import load_weights

__all__ = ["Imported", "callable_path", "function_blocks", "import_graph", "import_module",
           "load_weights", "module_block", "probe", "trace"]
