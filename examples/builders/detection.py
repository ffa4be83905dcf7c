"""Three small object detectors on the synthetic shapes: a single-stage grid
detector (YOLO), a two-stage detector (R-CNN: region proposals → RoIAlign → classifier and
box regressor) and a set-prediction transformer (DETR).

All three read data.Shapes (1,500 64x64 images of 1-3 squares, discs and triangles; 70 %
train, 10 % validation, 20 % test) through the same small convolutional backbone and report
COCO mAP@0.5 and mAP@[.5:.95] (detection.MeanAP) on every split:

- yolo_shapes: an 8x8 grid head (objectness, box, 3 classes per cell), GridEncode's
  centre-cell assignment, YOLOLoss (BCE + 1 − GIoU + CE), GridDecode and NMS.
- rcnn_shapes: a class-agnostic grid head proposes regions (YOLOLoss without classes, NMS
  keeps 8 per image); RoIAlign pools conv3's 16x16 maps (64 channels, stride 4) inside
  each proposal; an MLP gives 4 class scores (3 shapes + background) and box deltas
  (RoIHeadLoss); BoxDecode, ClassScores and a second NMS give the detections. One
  optimizer minimises both losses (losses.WeightedSum).
- detr_shapes: DETRHead (8 learned queries, 1 encoder and 2 decoder layers over the 8x8
  feature tokens) trained with SetLoss (Hungarian matching, CE + L1 + GIoU); no NMS.
  AdamW at lr 0.001 with the gradient norm clipped at 1 (DETR clips at 0.1): at lr 0.0005
  without clipping the loss stayed at 4.0 for the first 6 epochs; DETR is known to need
  many epochs; this one runs 20 (a few minutes on one idle core).

    python examples/builders/detection.py
"""

from __future__ import annotations

from _classic import save_all, wire
from _networks import chain

from nodegraph.model.graph import Graph

TRUTH = ("boxes", "labels", "mask")


def backbone(g: Graph) -> None:
    """64x64 → 32x32 (stride-2 conv) → 16x16 → 8x8 maps of 64 channels: conv1..relu4."""
    g.add("data.Shapes", id="data")
    g.add("layers.Conv2d", id="conv1", out_channels=16, kernel_size=3, stride=2, padding=1)
    g.add("activations.ReLU", id="relu1")
    g.add("layers.Conv2d", id="conv2", out_channels=32, kernel_size=3, padding=1)
    g.add("activations.ReLU", id="relu2")
    g.add("layers.MaxPool2d", id="pool2", kernel_size=2)
    g.add("layers.Conv2d", id="conv3", out_channels=64, kernel_size=3, padding=1)
    g.add("activations.ReLU", id="relu3")
    g.add("layers.MaxPool2d", id="pool3", kernel_size=2)
    g.add("layers.Conv2d", id="conv4", out_channels=64, kernel_size=3, padding=1)
    g.add("activations.ReLU", id="relu4")
    wire(g, "data.x -> conv1.input")
    chain(g, "conv1", "relu1", "conv2", "relu2", "pool2", "conv3", "relu3", "pool3", "conv4",
          "relu4")


def score(g: Graph, source: str, mask: str | None = None) -> None:
    """detection.MeanAP of the detections `source`.boxes/scores/labels(/mask)."""
    g.add("detection.MeanAP", id="map")
    wire(g, *(f"{source}.{p} -> map.{p}" for p in ("boxes", "scores", "labels")),
         *(f"data.{p} -> map.target_{p}" for p in TRUTH))
    if mask:
        wire(g, f"{mask} -> map.mask")


def grid_head(g: Graph, head: str, encode: str, loss: str, classes: int, **loss_params):
    g.add("detection.GridHead", id=head, num_classes=classes)
    g.add("detection.GridEncode", id=encode, grid=8)
    g.add("detection.YOLOLoss", id=loss, **loss_params)
    wire(g, f"relu4.output -> {head}.input", f"{head}.output -> {loss}.input",
         f"{encode}.output -> {loss}.target", *(f"data.{p} -> {encode}.{p}" for p in TRUTH))


def yolo() -> Graph:
    g = Graph("yolo-shapes")
    backbone(g)
    grid_head(g, "head", "encode", "loss", 3)
    g.add("detection.GridDecode", id="decode")
    g.add("detection.NMS", id="nms", iou_threshold=0.5, max_detections=10)
    g.add("optimizers.Adam", id="opt", lr=0.002)
    wire(g, "head.output -> decode.input", "loss.loss -> opt.loss",
         *(f"decode.{p} -> nms.{p}" for p in ("boxes", "scores", "labels")))
    score(g, "nms", "nms.mask")
    g.update_training(epochs=15, seed=0, device="auto")
    return g


def rcnn() -> Graph:
    g = Graph("rcnn-shapes")
    backbone(g)
    grid_head(g, "rpn", "rpn_targets", "rpn_loss", 0)
    g.add("detection.GridDecode", id="rpn_decode")
    g.add("detection.NMS", id="proposals", iou_threshold=0.6, score_threshold=0.0,
          max_detections=8, class_aware=False)
    g.add("detection.RoIAlign", id="roi", output_size=4, spatial_scale=0.25)
    g.add("layers.Flatten", id="flat", start_dim=2)
    g.add("layers.Linear", id="fc", out_features=128)
    g.add("activations.ReLU", id="fc_relu")
    g.add("layers.Linear", id="cls", out_features=4)
    g.add("layers.Linear", id="box", out_features=4)
    g.add("detection.RoIHeadLoss", id="roi_loss")
    g.add("losses.WeightedSum", id="loss")
    g.add("detection.BoxDecode", id="decode")
    g.add("detection.ClassScores", id="classes")
    g.add("detection.NMS", id="nms", iou_threshold=0.5, max_detections=10)
    g.add("optimizers.Adam", id="opt", lr=0.002)
    wire(g, "rpn.output -> rpn_decode.input",
         *(f"rpn_decode.{p} -> proposals.{p}" for p in ("boxes", "scores")),
         "relu3.output -> roi.features", "proposals.boxes -> roi.boxes",
         "fc_relu.output -> cls.input", "fc_relu.output -> box.input",
         "cls.output -> roi_loss.logits", "box.output -> roi_loss.deltas",
         "proposals.boxes -> roi_loss.proposals", "proposals.mask -> roi_loss.proposal_mask",
         *(f"data.{p} -> roi_loss.{p}" for p in TRUTH),
         "rpn_loss.loss -> loss.a", "roi_loss.loss -> loss.b", "loss.loss -> opt.loss",
         "box.output -> decode.deltas", "proposals.boxes -> decode.reference",
         "cls.output -> classes.logits", "decode.output -> nms.boxes",
         "classes.scores -> nms.scores", "classes.labels -> nms.labels",
         "proposals.mask -> nms.mask")
    chain(g, "roi", "flat", "fc", "fc_relu")
    score(g, "nms", "nms.mask")
    g.update_training(epochs=15, seed=0, device="auto")
    return g


def detr() -> Graph:
    g = Graph("detr-shapes")
    backbone(g)
    g.add("detection.DETRHead", id="detr", num_queries=8)
    g.add("detection.SetLoss", id="loss")
    g.add("detection.ClassScores", id="classes")
    g.add("optimizers.AdamW", id="opt", lr=0.001, weight_decay=0.0001, clip_grad_norm=1.0)
    wire(g, "relu4.output -> detr.features", "detr.logits -> loss.logits",
         "detr.boxes -> loss.boxes", *(f"data.{p} -> loss.target_{p}" for p in TRUTH),
         "loss.loss -> opt.loss", "detr.logits -> classes.logits")
    g.add("detection.MeanAP", id="map")
    wire(g, "detr.boxes -> map.boxes", "classes.scores -> map.scores",
         "classes.labels -> map.labels", *(f"data.{p} -> map.target_{p}" for p in TRUTH))
    g.update_training(epochs=20, seed=0, device="auto")
    return g


def build() -> dict[str, Graph]:
    return {"yolo_shapes": yolo(), "rcnn_shapes": rcnn(), "detr_shapes": detr()}


if __name__ == "__main__":
    save_all(build())
