"""Mean average precision the way COCO computes it (pycocotools' COCOeval, the backend of
torchmetrics' MeanAveragePrecision), over padded batches, for boxes only.

Per image and class, detections in falling score order (at most `max_dets`) each match the
unmatched true box of their class with the highest IoU ≥ t; per class over all images,
detections sorted by score (stable) give cumulative precision and recall; precision is made
monotone from the right and read at 101 recall points 0, 0.01, …, 1 (the first point whose
recall reaches each); AP is their mean. mAP averages over classes that have true boxes
(a class with true boxes but no detections counts 0), and over IoU thresholds
0.5:0.05:0.95 for `map`. No crowd or area ranges: every true box counts (area "all").
"""

from __future__ import annotations

import torch

from nodes._detection_boxes import box_iou

EPS = 2.220446049250313e-16  # np.spacing(1), COCOeval's guard against 0/0


def match(det_boxes, det_scores, det_labels, det_valid, gt_boxes, gt_labels, gt_valid,
          max_dets: int = 100):
    """COCO's greedy matching for a batch. Returns, per detection kept for scoring,
    (image, label, score, matched (T,) bool) as tensors, and the true-box count per class."""
    n, d = det_scores.shape
    t = torch.linspace(0.5, 0.95, 10, dtype=torch.float64)  # COCOeval.Params' iouThrs
    order = torch.sort(torch.where(det_valid, det_scores.double(),
                                   torch.full_like(det_scores, -torch.inf, dtype=torch.float64)),
                       dim=1, descending=True, stable=True).indices
    boxes = torch.gather(det_boxes.double(), 1, order[..., None].expand(n, d, 4))
    labels = torch.gather(det_labels, 1, order)
    scores = torch.gather(det_scores.double(), 1, order)
    valid = torch.gather(det_valid, 1, order)
    # COCO keeps the first max_dets detections per image and class
    same = (labels[:, :, None] == labels[:, None, :]) & valid[:, None, :]
    rank = (same & torch.ones(d, d, dtype=torch.bool).tril(-1)).sum(-1)
    valid = valid & (rank < max_dets)
    iou = box_iou(boxes, gt_boxes.double())  # (N, D, G)
    iou = torch.where((labels[:, :, None] == gt_labels[:, None, :]) & gt_valid[:, None, :],
                      iou, torch.full_like(iou, -1.0))
    g = gt_boxes.shape[1]
    taken = torch.zeros(n, len(t), g, dtype=torch.bool)
    matched = torch.zeros(n, d, len(t), dtype=torch.bool)
    floor = t.clamp(max=1 - 1e-10)
    for i in range(d):
        cand = iou[:, i, None, :].expand(n, len(t), g)
        ok = (cand >= floor[None, :, None]) & ~taken & valid[:, i, None, None]
        # ties go to the last true box, as COCOeval's `if ious < iou: continue` does
        score = torch.where(ok, cand, torch.full_like(cand, -2.0))
        best = g - 1 - torch.flip(score, [-1]).argmax(-1) if g else None
        hit = ok.any(-1)
        if best is not None:  # g > 0
            taken |= hit[..., None] & (torch.arange(g) == best[..., None])
        matched[:, i] = hit
    image = torch.arange(n)[:, None].expand(n, d)
    v = valid
    counts: dict[int, int] = {}
    for c in gt_labels[gt_valid].tolist():
        counts[c] = counts.get(c, 0) + 1
    return image[v], labels[v], scores[v], matched[v], counts


def average_precision(scores: torch.Tensor, matched: torch.Tensor, n_true: int
                      ) -> torch.Tensor:
    """COCOeval.accumulate for one class: AP per threshold (T,) from the class's detections
    (in image order, each image's in score order) and its number of true boxes."""
    t = matched.shape[1]
    if len(scores) == 0:
        return torch.zeros(t, dtype=torch.float64)
    order = torch.sort(-scores, stable=True).indices  # numpy's mergesort: ties keep order
    hit = matched[order].to(torch.float64)
    tp = hit.cumsum(0)
    fp = (1 - hit).cumsum(0)
    ap = torch.zeros(t, dtype=torch.float64)
    for j in range(t):
        rc = tp[:, j] / n_true
        pr = tp[:, j] / (fp[:, j] + tp[:, j] + EPS)
        pr = pr.flip(0).cummax(0).values.flip(0)  # precision made monotone from the right
        points = torch.linspace(0.0, 1.0, 101, dtype=torch.float64)  # COCO's recThrs
        idx = torch.searchsorted(rc, points, side="left")
        q = torch.where(idx < len(pr), pr[idx.clamp(max=len(pr) - 1)], 0.0)
        ap[j] = q.mean()
    return ap


def mean_ap(parts: list[tuple], counts: dict[int, int]) -> dict[str, float]:
    """mAP@0.5, mAP@0.75 and mAP@[.5:.95] from `match` results of every batch (in order)."""
    if not counts:
        return {"map_50": -1.0, "map_75": -1.0, "map": -1.0}
    labels = torch.cat([p[1] for p in parts]) if parts else torch.zeros(0, dtype=torch.long)
    scores = (torch.cat([p[2] for p in parts]) if parts
              else torch.zeros(0, dtype=torch.float64))
    matched = (torch.cat([p[3] for p in parts]) if parts
               else torch.zeros(0, 10, dtype=torch.bool))
    aps = torch.stack([average_precision(scores[labels == c], matched[labels == c], n)
                       for c, n in sorted(counts.items())])  # (classes, T)
    return {"map_50": float(aps[:, 0].mean()), "map_75": float(aps[:, 5].mean()),
            "map": float(aps.mean())}
