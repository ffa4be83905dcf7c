"""`nodegraph import`: a PyTorch module into a graph file, through one of two front ends.

Front ends: `fxtrace` (torch.fx, torch-level calls; tried first) and `exporting`
(torch.export, ATen ops mapped back to torch calls; when fx cannot trace the module, or
on request). Both hand the shared back end a graph of torch calls it plans into nodes
(`planner`), writes as a graph with size guards (`build`, `guards`), weights beside it
(`weights`), checked against the module (`check`), grouped by scope (`groups`) and laid
out (`finish`). `roundtrip` holds every way out of the graph to the module.
"""

from nodegraph.interop.importing.build import Imported, import_graph, import_module
from nodegraph.interop.importing.weights import load_weights

__all__ = ["Imported", "import_graph", "import_module", "load_weights"]
