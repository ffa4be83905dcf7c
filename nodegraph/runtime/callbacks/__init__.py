"""The parts of the training loop, each small and tested on its own.

`base` holds the hooks (`Callback`), their dispatcher and the `LoopState` the loop shares
with them; each other module is one unit: `stages` (stage schedule, freezing), `monitor`
(the monitored number, early stopping), `best` (best weights), `snapshots` (weight copies
for live views), `checkpointing` (save and resume), `probing` (activation and gradient
probes). Two units wrap the step rather than hook into the loop: `parallel` (the rank's
side of DDP) and `fallback` (torch.compile, or eager when it fails).
"""

from nodegraph.runtime.callbacks.base import Callback, Callbacks, LoopState, Stage
from nodegraph.runtime.callbacks.best import BestWeights
from nodegraph.runtime.callbacks.checkpointing import Checkpointing
from nodegraph.runtime.callbacks.monitor import EarlyStopping, Monitor
from nodegraph.runtime.callbacks.probing import Probing
from nodegraph.runtime.callbacks.snapshots import WeightSnapshots
from nodegraph.runtime.callbacks.stages import StageSchedule

__all__ = ["BestWeights", "Callback", "Callbacks", "Checkpointing", "EarlyStopping",
           "LoopState", "Monitor", "Probing", "Stage", "StageSchedule", "WeightSnapshots"]
