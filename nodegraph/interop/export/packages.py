"""What an exported file needs to import the model libraries its opaque blocks name.

An imported torchvision or timm model keeps some of its modules whole (``opaque.Module``
with ``target: "torchvision.ops.stochastic_depth:StochasticDepth"``), and the exported
file builds them by that path. torchvision from the package index is built for a CUDA
torch: beside a CPU-only torch its import fails while registering its compiled detection
ops, which classification models never call. nodegraph declares those ops first
(`nodegraph.model.packages`); the exported file must run without nodegraph, so it gets the
same few lines of its own, and says in a comment what it needs.
"""

from __future__ import annotations

import json

from nodegraph.interop.export.source import Source
from nodegraph.model.graph import Graph

LIBRARIES = ("torchvision", "timm")  # timm imports torchvision too

LOADER = '''\
# {why}: it needs
# {libraries} installed beside torch ({install}). A torchvision wheel built
# for a CUDA torch fails to import beside a CPU-only torch while it registers its compiled
# detection ops (torchvision::nms), which the classification models never call; declaring
# those ops first lets it import.
def load_torchvision():
    """`import torchvision`, also where its compiled ops do not load beside this torch."""
    try:
        import torchvision
    except RuntimeError as e:
        if "torchvision::" not in str(e):
            raise
        for name in [k for k in sys.modules if k.split(".")[0] == "torchvision"]:
            del sys.modules[name]
        ops = torch.library.Library("torchvision", "FRAGMENT")
        for op in ("nms", "qnms"):
            try:
                ops.define(f"{{op}}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
            except RuntimeError:
                pass  # declared already
        load_torchvision.ops = ops  # the declarations live as long as this object
        import torchvision
    return torchvision


load_torchvision()'''


def libraries(graph: Graph) -> list[str]:
    """The model libraries (torchvision, timm) some opaque block's params import by path."""
    text = json.dumps([n.params for n in graph if n.type.startswith("opaque.")], default=str)
    return [lib for lib in LIBRARIES if f'"{lib}.' in text or f'"{lib}:' in text]


def loader(graph: Graph, source: Source, transforms: bool = False) -> str | None:
    """The lines that make the libraries `graph` names importable (torchvision too when
    `transforms`: streamed data's augmentation), or None if it names none; the imports
    they use are added to `source`."""
    libs = libraries(graph) or (["torchvision"] if transforms else [])
    if not libs:
        return None
    needed = ["torchvision", *[lib for lib in libs if lib != "torchvision"]]
    source.add_import("sys")
    source.add_import("torch")
    source.reserve("load_torchvision")
    why = ("This model builds modules of " + " and ".join(needed) + " by their import path "
           "(see `by_path`)" if libraries(graph) else
           "Augmentation and preprocessing run torchvision.transforms.v2")
    return LOADER.format(why=why, libraries=" and ".join(needed),
                         install="pip install " + " ".join(needed))
