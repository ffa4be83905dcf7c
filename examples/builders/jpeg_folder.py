"""A small CNN trained on a folder of JPEG photos, with augmentation and 2 workers.

The folder holds one subfolder per class (circle/, cross/, square/, triangle/): photos
of mixed sizes that `data.ImageFolder` brings to 32 x 32 (letter-boxed: `resize = pad`, so
no shape is cut off). Wired into its `augment` input, a chain of augmentation blocks runs
on the training split only, in 2 DataLoader worker processes: a random crop after padding,
a horizontal flip and colour jitter (the class is the shape, never the colour), then
Normalize, which val/test get too. The model: Conv 3x3 x16 → ReLU → MaxPool → Conv 3x3
x32 → ReLU → MaxPool → Conv 3x3 x64 → ReLU → global average pool → Linear 4.

The file points at `data/shapes_sample`, 12 photos per class shipped beside it so the graph
opens, validates and runs as it is. Train on a real amount with a folder the script writes:

    python examples/make_shapes_jpegs.py /tmp/shapes            # 2,000 JPEGs
    nodegraph run examples/jpeg_folder.json --set data.path=/tmp/shapes

    python examples/builders/jpeg_folder.py
"""

from __future__ import annotations

from _classic import save_all, score, wire
from _networks import chain

from nodegraph.model.graph import Graph


def build() -> dict[str, Graph]:
    g = Graph("jpeg-folder")
    g.add("data.ImageFolder", id="data", path="data/shapes_sample", size=32, resize="pad",
          batch_size=32, val_fraction=0.2)
    g.add("augment.RandomCrop", id="crop", padding=3, padding_mode="edge")
    g.add("augment.HorizontalFlip", id="flip")
    g.add("augment.ColorJitter", id="jitter", brightness=0.3, contrast=0.3, saturation=0.3,
          hue=0.1)
    g.add("augment.Normalize", id="normalize", mean=[0.5, 0.5, 0.5], std=[0.25, 0.25, 0.25])
    wire(g, "crop.transform -> flip.input", "flip.transform -> jitter.input",
         "jitter.transform -> normalize.input", "normalize.transform -> data.augment")
    g.add("layers.Conv2d", id="conv1", out_channels=16, kernel_size=3, padding=1)
    g.add("activations.ReLU", id="relu1")
    g.add("layers.MaxPool2d", id="pool1", kernel_size=2)
    g.add("layers.Conv2d", id="conv2", out_channels=32, kernel_size=3, padding=1)
    g.add("activations.ReLU", id="relu2")
    g.add("layers.MaxPool2d", id="pool2", kernel_size=2)
    g.add("layers.Conv2d", id="conv3", out_channels=64, kernel_size=3, padding=1)
    g.add("activations.ReLU", id="relu3")
    g.add("layers.GlobalAvgPool", id="gap")
    g.add("layers.Linear", id="out", out_features=4)
    g.add("losses.CrossEntropy", id="loss")
    g.add("optimizers.Adam", id="opt", lr=0.003)
    chain(g, "conv1", "relu1", "pool1", "conv2", "relu2", "pool2", "conv3", "relu3", "gap",
          "out")
    wire(g, "data.x -> conv1.input", "out.output -> loss.input", "data.y -> loss.target",
         "loss.loss -> opt.loss")
    score(g, "out", accuracy="metrics.Accuracy")
    g.update_training({"epochs": 15, "seed": 0, "workers": 2})
    return {"jpeg_folder": g}


if __name__ == "__main__":
    save_all(build())
