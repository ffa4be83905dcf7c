"""Third-party model libraries, importable wherever graph files name them.

torchvision from the package index is built for a CUDA torch; beside the CPU torch its
import fails while registering fakes for compiled ops it never runs for classification
models. Both `nodegraph import` and the opaque blocks of an imported graph import it here.
"""

from __future__ import annotations

import sys
from typing import Any


def load_torchvision() -> Any:
    """`import torchvision`, also beside a CPU torch when the installed torchvision is a
    build whose compiled ops do not load: the op schemas its import registers fakes for
    are declared first. Only the detection ops use them; the classification models run
    on torch alone."""
    try:
        import torchvision
    except RuntimeError as e:
        if "torchvision::" not in str(e):
            raise
        for name in [k for k in sys.modules if k == "torchvision" or
                     k.startswith("torchvision.")]:
            del sys.modules[name]
        import torch

        global _TORCHVISION_OPS
        _TORCHVISION_OPS = torch.library.Library("torchvision", "FRAGMENT")
        for op in ("nms", "qnms"):
            try:
                _TORCHVISION_OPS.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold)"
                                        " -> Tensor")
            except RuntimeError:
                pass  # declared already
        import torchvision
    return torchvision


_TORCHVISION_OPS: Any = None  # the Library declaring torchvision's ops; kept alive
