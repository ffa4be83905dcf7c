"""Declared shape rules give what the meta path gives: shapes, dtypes, counts, bytes, errors.

Each case runs a block's rule and, separately, the meta path (the block built and run on
meta tensors, `validate._infer_op` with the rule taken away); outputs, trainable-parameter
counts and the (parameter, buffer, work) bytes must be equal, and a bad shape must raise
the same error naming the same port. A rule may decline a case (None): the meta path then
answers, and the cases marked `declines` check that it does so where meant.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import nodegraph
from nodegraph.check.opcache import OpCache
from nodegraph.check.validate import _infer_op
from nodegraph.kinds import dtypes, footprint, shapes
from nodegraph.model import settings

F32, F64, I64 = torch.float32, torch.float64, torch.int64
DEFAULTS = settings.resolve({})[0]  # the training settings of a file that sets none
ROOT = Path(__file__).resolve().parents[1]


def case(block, params=None, declines=False, **inputs):
    """A block, its params and input (shape, dtype) pairs by port; `declines`: the rule
    leaves this one to the meta path."""
    return pytest.param(block, params or {}, inputs, declines,
                        id=f"{block}-{params or ''}-{inputs}".replace(" ", ""))


X = ((8, 5), F32)
X3 = ((4, 6, 5), F32)
X64 = ((8, 5), F64)
IMG = ((2, 3, 7, 8), F32)
XI = ((8, 5), I64)
ACTIVATIONS = ["Identity", "Sign", "Sigmoid", "Tanh", "ReLU", "LeakyReLU", "ELU", "GELU",
               "SiLU", "ReLU6", "Hardswish", "Hardsigmoid", "Softplus", "Satlins", "Softmax",
               "LogSoftmax"]
ELEMENTWISE_LOSSES = ["MSE", "SSE", "MAE", "Huber", "BCE", "BCEWithLogits"]

CASES = [
    case("layers.Linear", {"out_features": 3}, input=X),
    case("layers.Linear", {"out_features": 3}, input=X3),
    case("layers.Linear", {"out_features": 7, "bias": False}, input=((2, 3, 4, 5), F32)),
    case("layers.Linear", {"out_features": 3, "trainable": False}, input=X),
    case("layers.Linear", {"out_features": 3, "in_features": 4}, input=X),  # wrong width
    case("layers.Linear", {"out_features": 3}, input=((8,), F32)),  # no feature dim
    case("layers.Linear", {"out_features": 3}, input=XI),  # integers
    case("layers.Linear", {"out_features": 3}, input=X64, declines=True),  # mixed dtypes
    case("layers.Linear", {"out_features": 1, "weight": [1, 2, 3, 4, 5]}, input=X),
    case("layers.Linear", {"out_features": 2, "weight": [[1, 0], [0, 1]],
                           "bias_init": [0.5, -1], "trainable": False}, input=((4, 2), F32)),
    case("layers.Linear", {"out_features": 2, "weight": [[1, 0], [0, 1]], "dtype": "float64",
                           "init": "xavier_uniform"}, input=((4, 3, 2), F64)),
    case("layers.Linear", {"out_features": 2, "weight": [1, 0]}, input=((4, 2), F32)),
    case("layers.Linear", {"out_features": 1, "weight": [[1, 0, 2]]}, input=((4, 2), F32)),
    case("layers.Linear", {"out_features": 2, "weight": [[1, 0], [1]]}, input=((4, 2), F32)),
    case("layers.Linear", {"out_features": 2, "bias_init": [1.0]}, input=((4, 2), F32)),
    case("layers.Linear", {"out_features": 1, "bias": False, "bias_init": [1.0]},
         input=((4, 2), F32)),
    case("layers.Linear", {"out_features": 1, "weight": [1, 2], "bias_init": [1, 2]},
         input=((4, 3), F32)),  # the input's width is checked first
    case("layers.Linear", {"out_features": 1, "weight": [1, 2, 3, 4, 5]}, input=X64,
         declines=True),
    case("layers.Flatten", {}, input=((4, 3, 2, 5), F32)),
    case("layers.Flatten", {"start_dim": 2}, input=((4, 3, 2, 5), F64)),
    case("layers.Flatten", {"start_dim": 1, "end_dim": 2}, input=((4, 3, 2, 5), F32)),
    case("layers.Flatten", {"start_dim": 0}, input=((4, 3), F32)),
    case("layers.Flatten", {"start_dim": 4}, input=((4, 3), F32)),
    case("layers.Reshape", {"shape": [2, 3]}, input=((4, 6), F32)),
    case("layers.Reshape", {"shape": [-1, 2]}, input=((4, 3, 4), F64)),
    case("layers.Reshape", {"shape": [5, 2]}, input=((4, 6), F32)),
    case("layers.Concat", {}, a=X, b=((8, 2), F32)),
    case("layers.Concat", {"dim": -1}, a=X3, b=((4, 6, 1), F32), c=((4, 6, 2), F32)),
    case("layers.Concat", {"dim": 0}, a=X, b=((3, 5), F32)),
    case("layers.Concat", {}, a=X, b=((7, 2), F32)),
    case("layers.Concat", {}, a=X, b=((8, 2), F64), declines=True),
    case("layers.Split", {"split_size": 2}, input=X),
    case("layers.Split", {"split_size": 4, "dim": -1}, input=X3),
    case("layers.Split", {"split_size": 5}, input=X),
    case("layers.Add", {}, a=X, b=((5,), F32)),
    case("layers.Add", {}, a=((8, 1, 5), F64), b=((3, 1), F64)),
    case("layers.Add", {}, a=X, b=((4,), F32)),
    case("layers.Add", {}, a=X, b=X64, declines=True),
    case("layers.Multiply", {}, a=X, b=X),
    case("layers.Multiply", {}, a=((8, 1), F32), b=((8, 7), F32)),
    case("layers.ResidualAdd", {}, input=X3, skip=X3),
    case("layers.ResidualAdd", {}, input=X, skip=((8, 4), F32)),
    case("layers.Scale", {}, input=X),
    case("layers.Scale", {"learnable": False}, input=X64, declines=True),  # mixed dtypes
    case("layers.Scale", {"learnable": False, "dtype": "float64"}, input=X64),
    case("layers.Scale", {}, input=XI, declines=True),
    case("layers.Dropout", {}, input=X),
    case("layers.Dropout", {"p": 0.25}, input=X3),
    case("layers.Dropout", {"p": 0.1}, input=X64),
    case("layers.Dropout", {"p": 0.0}, input=X),
    case("layers.Identity", {}, input=X3),
    case("layers.StopGradient", {}, input=X64),
    *(case(f"activations.{a}", {}, input=shape) for a in ACTIVATIONS
      for shape in (X, X3, X64)),
    *(case(f"activations.{a}", {}, input=XI) for a in ("Tanh", "ReLU", "Softmax")),
    case("activations.Sigmoid", {"slope": 2.0}, input=X),
    case("activations.Step", {}, input=X),
    case("activations.Step", {"threshold": 0.5, "value_at_zero": 1.0}, input=X3),
    case("activations.Step", {}, input=X64),
    case("activations.Step", {}, input=XI),
    case("activations.LeakyReLU", {"negative_slope": 0.2}, input=X3),
    case("activations.Softmax", {"dim": 1, "temperature": 2.0}, input=X3),
    case("activations.LogSoftmax", {"dim": 3}, input=X3),
    case("activations.GELU", {"approximate": "tanh"}, input=X64),
    *(case(f"losses.{loss}", params, input=shape, target=shape)
      for loss in ELEMENTWISE_LOSSES for shape in (((8, 1), F32), X3, X64)
      for params in ({}, {"scale": 0.5})),
    *(case(f"losses.{loss}", {"reduction": r}, input=X, target=X)
      for loss in ELEMENTWISE_LOSSES if loss != "SSE" for r in ("sum", "none")),
    *(case(f"losses.{loss}", {}, input=X, target=((8, 4), F32)) for loss in ("MSE", "BCE")),
    case("losses.MSE", {}, input=XI, target=XI),
    case("losses.MSE", {}, input=X, target=X64, declines=True),
    case("losses.BCEWithLogits", {"pos_weight": 3.0}, input=X, target=X, declines=True),
    case("norm.BatchNorm1d", {}, input=X),
    case("norm.BatchNorm1d", {"affine": False}, input=X3),
    case("norm.BatchNorm1d", {}, input=((4, 3, 2, 2), F32)),
    case("norm.BatchNorm1d", {}, input=((8,), F32)),
    case("norm.BatchNorm1d", {}, input=XI),
    case("norm.BatchNorm1d", {}, input=((1, 5), F32), declines=True),
    case("norm.BatchNorm1d", {}, input=X64, declines=True),
    case("norm.BatchNorm1d", {"momentum": None}, input=X, declines=True),
    case("norm.BatchNorm2d", {}, input=((4, 3, 5, 6), F32)),
    case("norm.BatchNorm2d", {"affine": False}, input=((2, 7, 3, 3), F32)),
    case("norm.BatchNorm2d", {}, input=X3),
    case("layers.Conv2d", {"out_channels": 4}, input=IMG),
    case("layers.Conv2d", {"out_channels": 6, "kernel_size": [5, 3], "stride": [2, 1],
                           "padding": [1, 2], "dilation": [1, 2], "groups": 3}, input=IMG),
    case("layers.Conv2d", {"out_channels": 4, "bias": False, "stride": [3]}, input=IMG),
    case("layers.Conv2d", {"out_channels": 4, "trainable": False}, input=((1, 1, 3, 3), F32)),
    case("layers.Conv2d", {"out_channels": 4}, input=X),
    case("layers.Conv2d", {"out_channels": 4, "groups": 2}, input=IMG),
    case("layers.Conv2d", {"out_channels": 4, "kernel_size": [9]}, input=IMG),
    case("layers.Conv2d", {"out_channels": 4, "stride": [2], "padding": "same"}, input=IMG),
    case("layers.Conv2d", {"out_channels": 4, "padding": "same"}, input=IMG),
    case("layers.Conv2d", {"out_channels": 4, "padding": "same", "kernel_size": [2, 4]},
         input=IMG),
    case("layers.Conv2d", {"out_channels": 4, "padding": "same", "kernel_size": [3, 2],
                           "dilation": [2, 1], "dtype": "float64"}, input=((2, 3, 4, 5), F64)),
    case("layers.Conv2d", {"out_channels": 4, "padding": "same", "kernel_size": [9]},
         input=IMG),
    case("layers.Conv2d", {"out_channels": 4, "padding": "valid", "kernel_size": [2]},
         input=IMG),
    case("layers.Conv2d", {"out_channels": 4, "padding": "valid", "kernel_size": [9]},
         input=IMG),
    *(case("layers.Conv2d", {"out_channels": 4, "padding": padding, "padding_mode": mode,
                             **extra}, input=IMG)
      for mode in ("reflect", "replicate", "circular")
      for padding, extra in (([1], {}), ([2, 1], {"stride": [2]}), ("same", {}),
                             ("same", {"kernel_size": [4, 2]}))),
    case("layers.Conv2d", {"out_channels": 4, "padding": [0], "padding_mode": "reflect"},
         input=IMG),
    case("layers.Conv2d", {"out_channels": 4, "padding": [7], "padding_mode": "reflect"},
         input=IMG, declines=True),
    case("layers.Conv2d", {"out_channels": 4, "padding": [7], "padding_mode": "replicate"},
         input=IMG, declines=True),
    case("layers.Conv2d", {"out_channels": 1, "kernel_size": [2], "stride": [2],
                           "bias": False, "weight": [[1, 2], [3, 4]]},
         input=((1, 1, 4, 4), F32)),
    case("layers.Conv2d", {"out_channels": 2, "kernel_size": [1], "groups": 2,
                           "weight": [[[[1]]], [[[2]]]], "bias_init": [0, 1]},
         input=((1, 2, 3, 3), F32)),
    case("layers.Conv2d", {"out_channels": 1, "kernel_size": [2], "weight": [[1, 2, 3]]},
         input=((1, 1, 4, 4), F32)),
    case("layers.Conv2d", {"out_channels": 2, "kernel_size": [2], "bias_init": [1, 2, 3]},
         input=((1, 1, 4, 4), F32)),
    case("layers.Conv2d", {"out_channels": 2, "bias": False, "bias_init": [1, 2]},
         input=((1, 1, 4, 4), F32)),
    case("layers.Conv2d", {"out_channels": 4}, input=((2, 3, 7, 8), F64), declines=True),
    case("layers.Conv1d", {"out_channels": 5, "kernel_size": [4], "stride": [2]},
         input=((2, 3, 11), F32)),
    case("layers.Conv1d", {"out_channels": 5, "kernel_size": [4], "padding": "same"},
         input=((2, 3, 11), F32)),
    case("layers.Conv1d", {"out_channels": 2, "kernel_size": [3], "padding": [2],
                           "padding_mode": "circular", "weight": [[1, 2, 3], [3, 2, 1]]},
         input=((2, 1, 11), F32)),
    case("layers.MaxPool2d", {}, input=IMG),
    case("layers.MaxPool2d", {"kernel_size": [3], "stride": [2], "padding": [1]},
         input=((2, 3, 8, 8), F64)),
    case("layers.MaxPool2d", {"kernel_size": [3], "stride": [2], "ceil_mode": True},
         input=((2, 3, 8, 9), F32)),
    case("layers.MaxPool2d", {"kernel_size": [2, 3], "dilation": [2], "ceil_mode": True,
                              "padding": [1]}, input=((1, 2, 9, 10), F32)),
    case("layers.MaxPool2d", {"kernel_size": [4], "padding": [3]}, input=IMG),
    case("layers.MaxPool2d", {"kernel_size": [9]}, input=IMG),
    case("layers.MaxPool2d", {}, input=X3),
    case("layers.MaxPool1d", {"kernel_size": [3], "ceil_mode": True}, input=((2, 3, 10), F32)),
    case("losses.WeightedSum", {}, a=((), F32)),
    case("losses.WeightedSum", {"w_b": 0.5}, a=((), F32), b=((), F32), d=((), F32)),
    case("losses.WeightedSum", {}, a=((), F64), c=((), F64)),
    case("losses.WeightedSum", {}, a=((), F32), b=((3,), F32)),
    case("losses.WeightedSum", {}, a=((), F32), b=((), F64), declines=True),
    case("losses.CrossEntropy", {}, input=X, target=((8,), I64)),
    case("losses.CrossEntropy", {"reduction": "sum", "scale": 2.0}, input=X64,
         target=((8,), I64)),
    case("losses.CrossEntropy", {"reduction": "none"}, input=X, target=((8,), I64)),
    case("losses.CrossEntropy", {}, input=X, target=((7,), I64)),
    case("losses.CrossEntropy", {}, input=((8,), F32), target=((8,), I64)),
    case("losses.CrossEntropy", {}, input=X3, target=((4, 6), I64)),
    case("losses.CrossEntropy", {"reduction": "none"}, input=X3, target=((4, 6), I64)),
    case("losses.CrossEntropy", {"reduction": "sum"}, input=X64, target=((8, 1), I64)),
    case("losses.CrossEntropy", {"reduction": "none"}, input=X, target=((8, 1), I64)),
    case("losses.CrossEntropy", {}, input=X3, target=((4, 5), I64)),
    case("losses.CrossEntropy", {}, input=X, target=((8, 5), F32), declines=True),
    case("losses.CrossEntropy", {}, input=X, target=((8, 4), F32)),
    case("losses.CrossEntropy", {}, input=X, target=((8,), torch.int32), declines=True),
    *(case("losses.Hinge", params, input=scores, target=target)
      for params in ({}, {"reduction": "sum"}, {"reduction": "none", "margin": 0.5},
                     {"scale": 2.0})
      for scores, target in ((((8, 1), F32), ((8, 1), F32)), (((8,), F64), ((8,), I64)),
                             (((8, 1), F32), ((8,), torch.bool)),
                             (((8, 1), F32), ((8,), F64)),
                             (((6, 4), F32), ((6,), I64)), (((6, 4), F64), ((6, 1), I64)))),
    case("losses.Hinge", {}, input=((8, 1), F32), target=((7, 1), F32)),
    case("losses.Hinge", {}, input=((8, 1), F32), target=((8, 2), F32)),
    case("losses.Hinge", {}, input=((8, 1), I64), target=((8, 1), F32)),
    case("losses.Hinge", {}, input=((6, 4), F32), target=((6,), F32)),
    case("losses.Hinge", {}, input=((6, 4), F32), target=((5,), I64)),
    case("losses.Hinge", {}, input=((6, 4), F32), target=((6,), torch.int32), declines=True),
    case("losses.Hinge", {}, input=((2, 3, 4), F32), target=((2, 3), I64), declines=True),
    *(case(f"norm.{b}", params) for b in ("L1Penalty", "L2Penalty")
      for params in ({}, {"weight": 0.5, "nodes": ["fc"]}, {"dtype": "float64"})),
    case("norm.LayerNorm", {}, input=X),
    case("norm.LayerNorm", {"dims": 2, "bias": False}, input=X3),
    case("norm.LayerNorm", {"elementwise_affine": False, "eps": 1e-3}, input=X3),
    case("norm.LayerNorm", {"elementwise_affine": False}, input=X64),
    case("norm.LayerNorm", {"dtype": "float64"}, input=((2, 3, 4, 5), F64)),
    case("norm.LayerNorm", {"dims": 3}, input=((2, 3, 4, 5), F32)),
    case("norm.LayerNorm", {"dims": 2}, input=X),
    case("norm.LayerNorm", {}, input=XI),
    case("norm.LayerNorm", {}, input=X64, declines=True),
    case("norm.LayerNorm", {}, input=((8, 5), torch.bfloat16), declines=True),
    case("norm.InstanceNorm2d", {}, input=IMG),
    case("norm.InstanceNorm2d", {"affine": True}, input=IMG),
    case("norm.InstanceNorm2d", {"affine": True, "dtype": "float64"},
         input=((3, 2, 5, 1), F64)),
    case("norm.InstanceNorm2d", {"eps": 0.1, "momentum": None}, input=((1, 3, 2, 2), F64)),
    case("norm.InstanceNorm2d", {}, input=X3),
    case("norm.InstanceNorm2d", {}, input=((2, 3, 4, 4), I64)),
    case("norm.InstanceNorm2d", {"affine": True}, input=((2, 3, 4, 4), F64), declines=True),
    case("norm.InstanceNorm2d", {"track_running_stats": True}, input=IMG, declines=True),
    case("norm.InstanceNorm2d", {}, input=((2, 3, 1, 1), F32), declines=True),
    case("layers.PolynomialFeatures", {}, input=X),
    case("layers.PolynomialFeatures", {"degree": 3, "include_bias": True}, input=X3),
    case("layers.PolynomialFeatures", {"degree": 1}, input=X64),
    case("layers.PolynomialFeatures", {"degree": 1, "include_bias": True}, input=X64),
    case("layers.PolynomialFeatures", {}, input=((8,), F32)),
    case("layers.PolynomialFeatures", {}, input=XI),
    case("layers.Embedding", {"num_embeddings": 10, "embedding_dim": 4}, input=XI),
    case("layers.Embedding", {"num_embeddings": 10, "embedding_dim": 3, "padding_idx": 0},
         input=((8,), torch.int32)),
    case("layers.Embedding", {"num_embeddings": 7, "embedding_dim": 2, "dtype": "float64"},
         input=((2, 3, 4), I64)),
    case("layers.Embedding", {"num_embeddings": 10, "embedding_dim": 4, "padding_idx": 10},
         input=XI),
    case("layers.Embedding", {"num_embeddings": 10, "embedding_dim": 4}, input=X),
    case("layers.Embedding", {"num_embeddings": 10, "embedding_dim": 4},
         input=((8,), torch.bool)),
    case("layers.Embedding", {"num_embeddings": 10, "embedding_dim": 4},
         input=((8,), torch.uint8), declines=True),
    *(case(f"layers.{b}", {}, input=shape) for b in ("GlobalAvgPool", "GlobalMaxPool")
      for shape in (IMG, ((2, 3, 4), F64), ((2, 3, 4, 5, 6), F32), X, ((2, 3, 1, 1), F32))),
    case("layers.GlobalAvgPool", {}, input=((2, 3, 4), I64), declines=True),
    case("attention.LMHead", {"vocab_size": 11}, input=((4, 6, 8), F32)),
    case("attention.LMHead", {"vocab_size": 3, "bias": False, "dtype": "float64"},
         input=((2, 1, 5), F64)),
    case("attention.LMHead", {"vocab_size": 11}, input=X),
    case("attention.LMHead", {"vocab_size": 11}, input=((4, 6, 8), I64)),
    case("attention.LMHead", {"vocab_size": 11}, input=((4, 6, 8), F64), declines=True),
    *(case("attention.SinusoidalPositionalEncoding", params, input=t)
      for params in ({}, {"base": 100.0})
      for t in (((4, 6, 8), F32), ((2, 3, 10), F64), ((2, 3, 4), torch.bfloat16))),
    case("attention.SinusoidalPositionalEncoding", {}, input=((4, 6, 7), F32)),
    case("attention.SinusoidalPositionalEncoding", {}, input=X),
    case("attention.LearnedPositionalEncoding", {"max_len": 10}, input=((4, 6, 8), F32)),
    case("attention.LearnedPositionalEncoding", {"max_len": 6, "dtype": "float64"},
         input=((4, 6, 8), F64)),
    case("attention.LearnedPositionalEncoding", {"max_len": 5}, input=((4, 6, 8), F32)),
    case("attention.LearnedPositionalEncoding", {}, input=((4, 6, 8), F64), declines=True),
    case("attention.ClsToken", {}, input=((4, 6, 8), F32)),
    case("attention.ClsToken", {"dtype": "float64"}, input=((1, 1, 3), F64)),
    case("attention.ClsToken", {}, input=((4, 6), F32)),
    case("attention.ClsToken", {}, input=((4, 6, 8), F64), declines=True),
    *(case("attention.TakeToken", {"index": i}, input=t) for i in (0, -1, 5, 6, -7)
      for t in (((4, 6, 8), F32), ((2, 6, 3), F64))),
    case("attention.TakeToken", {}, input=((4, 6, 8), I64)),
    case("attention.PatchEmbedding", {"patch_size": 2, "embed_dim": 5},
         input=((2, 3, 4, 6), F32)),
    case("attention.PatchEmbedding", {"patch_size": 3, "embed_dim": 4, "bias": False,
                                      "dtype": "float64"}, input=((1, 1, 9, 3), F64)),
    case("attention.PatchEmbedding", {"patch_size": 4}, input=((2, 3, 4, 6), F32)),
    case("attention.PatchEmbedding", {}, input=((2, 4, 4), F32)),
    case("attention.PatchEmbedding", {"patch_size": 2}, input=((2, 3, 4, 6), F64),
         declines=True),
    case("attention.PatchEmbedding", {"patch_size": 2}, input=((2, 3, 4, 6), I64),
         declines=True),
    *(case("attention.TransformerEncoderBlock", {"nhead": h, **params}, input=t)
      for h, t in ((2, ((2, 3, 8), F32)), (1, ((3, 1, 4), F32)), (4, ((1, 5, 8), F32)),
                   (2, ((3, 1, 4), F32)), (1, ((2, 3, 4), F32)))
      for params in ({}, {"dim_feedforward": 16}, {"dropout": 0.0}, {"dropout": 1.0},
                     {"causal": True, "norm_first": False, "activation": "gelu",
                      "bias": False}, {"causal": True, "dropout": 0.0})),
    case("attention.TransformerEncoderBlock", {"nhead": 2, "dtype": "float64",
                                               "dropout": 0.5}, input=((2, 6, 4), F64)),
    case("attention.TransformerEncoderBlock", {"nhead": 3}, input=((2, 3, 8), F32)),
    case("attention.TransformerEncoderBlock", {"nhead": 2}, input=((3, 4, 2), F32),
         declines=True),
    case("attention.TransformerEncoderBlock", {"nhead": 2}, input=((2, 3, 8), F32),
         key_padding_mask=((2, 4), torch.bool)),
    case("attention.TransformerEncoderBlock", {"nhead": 2}, input=((2, 3, 8), F32),
         key_padding_mask=((2, 3), torch.bool), declines=True),
    case("attention.TransformerEncoderBlock", {"nhead": 2}, input=((2, 3, 8), F64),
         declines=True),
    *(case(f"samplers.{b}", {**extra, **params}, **inputs)
      for b, extra in (("GaussianNoise", {"mean": 1.0, "std": 0.5}),
                       ("UniformNoise", {"low": -1.0}))
      for params, inputs in (
          ({"shape": [3]}, {"like": XI}), ({"shape": [2, 3], "batch_size": 5}, {}),
          ({}, {"like": ((4, 3, 2), I64)}), ({"batch_size": 5}, {}), ({"shape": [2]}, {}))),
    *(case("samplers.PriorSample", params, **inputs)
      for params, inputs in (({"latent_dim": 4}, {"like": XI}),
                             ({"latent_dim": 2, "batch_size": 3}, {}),
                             ({"latent_dim": 2}, {}))),
    *(case(f"samplers.{b}", params, like=like, declines=True)
      for b, params in (("GaussianNoise", {}), ("UniformNoise", {"shape": [2]}),
                        ("PriorSample", {"latent_dim": 4}))
      for like in (X, X3)),
    case("samplers.UniformNoise", {"low": 1.0, "high": 1.0}, like=XI),
    case("samplers.Reparameterize", {}, mu=X, logvar=X),
    case("samplers.Reparameterize", {"sample_in_eval": True}, mu=X64, logvar=X64),
    case("samplers.Reparameterize", {}, mu=X, logvar=((8, 4), F32)),
    case("samplers.Reparameterize", {}, mu=XI, logvar=X),
    case("samplers.Reparameterize", {}, mu=X, logvar=X64, declines=True),
    *(case("generative.ELBO", {"reconstruction": r, "reduction": red, "beta": 2.0},
           recon=recon, target=recon, mu=mu, logvar=mu)
      for r in ("bce", "bce_logits", "mse") for red in ("batchmean", "sum")
      for recon, mu in ((((8, 6), F32), ((8, 2), F32)), (((4, 1, 3, 3), F64), ((4, 5), F64)))),
    case("generative.ELBO", {}, recon=X, target=((8, 4), F32), mu=X, logvar=X),
    case("generative.ELBO", {}, recon=X, target=X, mu=((7, 2), F32), logvar=((7, 2), F32)),
    case("generative.ELBO", {}, recon=X, target=X, mu=X64, logvar=X64, declines=True),
    *(case("generative.GANDiscriminatorLoss", params, real_logits=a, fake_logits=b)
      for params in ({}, {"real_label": 0.9})
      for a, b in ((((8, 1), F32), ((8,), F32)), (((3,), F64), ((5, 1), F64)))),
    case("generative.GANDiscriminatorLoss", {}, real_logits=X, fake_logits=((8,), F32)),
    case("generative.GANDiscriminatorLoss", {}, real_logits=((8,), I64),
         fake_logits=((8,), F32)),
    case("generative.GANDiscriminatorLoss", {}, real_logits=((8,), F64),
         fake_logits=((8,), F32), declines=True),
    *(case("generative.GANGeneratorLoss", {"form": f}, fake_logits=t)
      for f in ("non_saturating", "minimax") for t in (((8, 1), F32), ((3,), F64))),
    case("generative.GANGeneratorLoss", {}, fake_logits=((), F32)),
    *(case("generative.DiffusionEpsLoss", {"reduction": r}, eps_pred=t, eps=t)
      for r in ("mean", "sum") for t in (X, ((2, 1, 4, 4), F64))),
    case("generative.DiffusionEpsLoss", {}, eps_pred=X, eps=X3),
    case("generative.DiffusionEpsLoss", {}, eps_pred=X, eps=X64, declines=True),
    *(case("generative.TimestepEmbedding", params, input=t)
      for params in ({"embedding_dim": 8}, {"embedding_dim": 8, "mlp_features": 16},
                     {"embedding_dim": 6, "dtype": "float64", "max_period": 100.0},
                     {"embedding_dim": 4, "mlp_features": 3, "dtype": "float64"},
                     {"embedding_dim": 4, "mlp_features": 3, "dtype": "bfloat16"})
      for t in (((5,), I64), ((5, 1), I64), ((3,), torch.int32))),
    case("generative.TimestepEmbedding", {"embedding_dim": 4}, input=((5,), F32)),
    case("generative.TimestepEmbedding", {"embedding_dim": 4, "dtype": "float64"},
         input=((5,), F64)),
    case("generative.TimestepEmbedding", {"embedding_dim": 5}, input=((5,), I64)),
    case("generative.TimestepEmbedding", {"embedding_dim": 4}, input=((5, 2), I64)),
    case("generative.TimestepEmbedding", {"embedding_dim": 4}, input=((5,), F64),
         declines=True),
    *(case("generative.AffineCoupling", params, **inputs)
      for params in ({"hidden_features": 16}, {"hidden_features": 4, "tanh_scale": False,
                                               "mask": "half", "flip": True})
      for inputs in ({"input": ((8, 3), F32)}, {"input": ((8, 3), F32), "log_det": ((8,), F32)},
                     {"input": ((5, 2), F32), "log_det": ((5, 1), F32)})),
    case("generative.AffineCoupling", {"hidden_features": 3, "dtype": "float64"},
         input=((4, 6), F64), log_det=((4,), F64)),
    case("generative.AffineCoupling", {}, input=((8, 1), F32)),
    case("generative.AffineCoupling", {}, input=X3),
    case("generative.AffineCoupling", {}, input=X, log_det=((7,), F32)),
    case("generative.AffineCoupling", {}, input=X64, declines=True),
    case("generative.AffineCoupling", {}, input=X, log_det=((8,), F64), declines=True),
    *(case("generative.FlowNLL", {"reduction": r}, z=z, log_det=ld)
      for r in ("mean", "sum")
      for z, ld in ((((8, 3), F32), ((8,), F32)), (((4, 2, 3), F64), ((4, 1), F64)))),
    case("generative.FlowNLL", {}, z=X, log_det=((7,), F32)),
    case("generative.FlowNLL", {}, z=XI, log_det=((8,), F32)),
    case("generative.FlowNLL", {}, z=X, declines=True),
    case("generative.FlowNLL", {}, z=X, log_det=((8,), F64), declines=True),
    *(case(f"recurrent.{b}", params, input=t)
      for b in ("RNN", "LSTM", "GRU")
      for params, t in (({"hidden_size": 5}, ((4, 6, 3), F32)),
                        ({"hidden_size": 5, "num_layers": 3, "bidirectional": True,
                          "dropout": 0.2}, ((4, 6, 3), F32)),
                        ({"hidden_size": 2, "bias": False, "num_layers": 2,
                          "dtype": "float64"}, ((1, 1, 7), F64)),
                        ({}, X), ({}, ((4, 6, 3), I64)))),
    case("recurrent.RNN", {"nonlinearity": "relu", "hidden_size": 3}, input=((2, 5, 4), F32)),
    case("recurrent.RNN", {"residual": True}, input=((2, 5, 4), F32), declines=True),
    case("recurrent.LSTM", {"convention": "notes"}, input=((2, 5, 4), F32), declines=True),
    case("recurrent.GRU", {}, input=((2, 5, 4), F64), declines=True),
    case("layers.Permute", {"dims": [2, 1]}, input=X3),
    case("layers.Permute", {"dims": [3, 1, 2]}, input=((2, 3, 4, 5), I64)),
    case("layers.Permute", {"dims": [1, 1]}, input=X3),
    case("layers.Permute", {"dims": [2, 1]}, input=X),
    case("layers.Parameter", {"shape": [3, 4]}),
    case("layers.Parameter", {"shape": [5], "init": "zeros", "dtype": "float64"}),
    case("layers.Parameter", {"shape": [2, 3, 4], "init": "xavier_uniform"}),
    case("layers.Parameter", {"shape": [5], "init": "xavier_uniform"}),
    case("layers.RBF", {"num_centers": 7}, input=((4, 5), F32)),
    case("layers.RBF", {"num_centers": 2, "width": 0.5, "dtype": "float64"},
         input=((4, 6, 5), F64)),
    case("layers.RBF", {}, input=((8,), F32)),
    case("layers.RBF", {}, input=XI),
    case("layers.RBF", {}, input=X64, declines=True),
    *(case(f"layers.{kind}Pool{dims}d", params, input=t)
      for kind in ("Avg", "Min", "Max")
      for dims, t in ((1, ((2, 3, 10), F32)), (2, IMG), (2, ((1, 2, 9, 10), F64)))
      for params in ({}, {"kernel_size": [3], "stride": [2], "padding": [1]},
                     {"kernel_size": [3], "ceil_mode": True}, {"kernel_size": [9]})),
    *(case(f"layers.AvgPool{dims}d", {"count_include_pad": False, "padding": [1],
                                      "kernel_size": [2], "ceil_mode": True}, input=t)
      for dims, t in ((1, ((2, 3, 11), F32)), (2, ((2, 3, 7, 7), F32)))),
    case("layers.MinPool2d", {"kernel_size": [2, 3], "dilation": [2], "padding": [1]},
         input=((1, 2, 9, 10), F32)),
    case("layers.MinPool2d", {}, input=X3),
    case("layers.AvgPool2d", {}, input=((2, 3, 4, 4), I64)),
    case("layers.AvgPool2d", {"kernel_size": [2], "padding": [2]}, input=IMG),
    *(case("losses.GaussianKL", {"reduction": r, "scale": scale}, mu=t, logvar=t)
      for r in ("batchmean", "sum", "none") for scale in (1.0, 0.5)
      for t in (X, ((4, 2, 3), F64))),
    case("losses.GaussianKL", {}, mu=X, logvar=((8, 4), F32)),
    case("losses.GaussianKL", {}, mu=X, logvar=X64, declines=True),
    *(case("losses.KLDivergence", {"reduction": r, "scale": scale, "input_kind": kind},
           input=t, target=t)
      for r in ("batchmean", "sum", "none") for scale in (1.0, 2.0)
      for kind in ("logits", "log_probs") for t in (X, ((4, 2, 3), F64))),
    case("losses.KLDivergence", {}, input=((8,), F32), target=((8,), F32)),
    case("losses.KLDivergence", {}, input=X, target=XI),
    case("losses.KLDivergence", {}, input=X, target=X64, declines=True),
    *(case(f"attention.{b}", params, query=q, key=k, value=v)
      for b in ("DotProduct", "ScaledDotProduct")
      for params in ({}, {"temperature": 0.5}, {"causal": True})
      for q, k, v in ((((2, 3, 4), F32), ((2, 5, 4), F32), ((2, 5, 6), F32)),
                      (((1, 4, 2), F64), ((1, 4, 2), F64), ((1, 4, 2), F64)),
                      (((3, 1, 4), F32), ((3, 1, 4), F32), ((3, 1, 1), F32)))),
    case("attention.DotProduct", {}, query=X3, key=((4, 6, 4), F32), value=X3),
    case("attention.DotProduct", {}, query=X3, key=X3, value=((4, 5, 5), F32)),
    case("attention.DotProduct", {}, query=X, key=X, value=X),
    case("attention.ScaledDotProduct", {}, query=X3, key=X3, value=X3,
         attn_mask=((4, 6), torch.bool)),
    case("attention.ScaledDotProduct", {}, query=X3, key=X3, value=X3,
         attn_mask=((1, 6, 6), torch.bool), declines=True),
    case("attention.ScaledDotProduct", {}, query=X3, key=X3, value=((4, 6, 5), F64),
         declines=True),
    *(case("attention.MultiHeadSelfAttention", {"num_heads": h, **params}, input=t)
      for h, t in ((2, ((2, 3, 8), F32)), (1, ((3, 1, 4), F32)), (4, ((1, 5, 8), F32)),
                   (2, ((3, 1, 4), F32)), (1, ((2, 3, 4), F32)))
      for params in ({}, {"dropout": 0.1}, {"dropout": 1.0}, {"causal": True, "bias": False},
                     {"causal": True, "dropout": 0.3})),
    case("attention.MultiHeadSelfAttention", {"num_heads": 2, "dtype": "float64"},
         input=((2, 6, 4), F64)),
    case("attention.MultiHeadSelfAttention", {"num_heads": 3}, input=((2, 3, 8), F32)),
    case("attention.MultiHeadSelfAttention", {}, input=X),
    case("attention.MultiHeadSelfAttention", {"num_heads": 2}, input=((2, 3, 8), F32),
         key_padding_mask=((3, 3), torch.bool)),
    case("attention.MultiHeadSelfAttention", {"num_heads": 2}, input=((2, 3, 8), F32),
         key_padding_mask=((2, 3), torch.bool), declines=True),
    case("attention.MultiHeadSelfAttention", {"num_heads": 2}, input=((3, 4, 2), F32),
         declines=True),
    case("attention.MultiHeadSelfAttention", {"num_heads": 2}, input=((2, 3, 8), F64),
         declines=True),
    *(case("recurrent.Highway", {"activation": a}, input=t)
      for a in ("relu", "tanh", "sigmoid", "identity") for t in (X, X3)),
    case("recurrent.Highway", {"dtype": "float64", "gate_bias": -2.0}, input=X64),
    case("recurrent.Highway", {}, input=((8,), F32)),
    case("recurrent.Highway", {}, input=XI),
    case("recurrent.Highway", {}, input=X64, declines=True),
    case("layers.AdaptiveAvgPool2d", {}, input=IMG),
    case("layers.AdaptiveAvgPool2d", {"output_size": [2, 3]}, input=((2, 3, 7, 8), F64)),
    case("layers.AdaptiveAvgPool2d", {"output_size": [9, 10]}, input=IMG),
    case("layers.AdaptiveAvgPool2d", {"output_size": [2]}, input=IMG),
    case("layers.AdaptiveAvgPool2d", {}, input=X3),
    case("layers.AdaptiveAvgPool2d", {}, input=((2, 3, 4, 4), I64), declines=True),
    case("samplers.LangevinStep", {}, input=X, score=X),
    case("samplers.LangevinStep", {"step_size": 0.1, "noise_scale": 0.0}, input=X3, score=X3),
    case("samplers.LangevinStep", {}, input=X, score=((8, 4), F32)),
    case("samplers.LangevinStep", {}, input=X, score=XI),
    case("samplers.LangevinStep", {}, input=X, score=X64, declines=True),
    case("layers.Constant", {"value": [[1, 2, 3]], "dtype": "int64"}),
    case("layers.Constant", {"value": 1, "dtype": "bool"}),
    case("layers.Constant", {"value": -1.0}, declines=True),
    case("layers.Constant", {"value": [1.5], "dtype": "float64"}, declines=True),
    case("layers.Upsample", {}, input=IMG),
    case("layers.Upsample", {"scale_factor": 1.5, "mode": "bilinear"}, input=IMG),
    case("layers.Upsample", {"scale_factor": 2.7}, input=((2, 3, 5), F64)),
    case("layers.Upsample", {"scale_factor": 0.5, "mode": "linear", "align_corners": True},
         input=((2, 3, 5), F32)),
    case("layers.Upsample", {"scale_factor": 3, "mode": "bicubic"}, input=IMG),
    case("layers.Upsample", {"scale_factor": 1.1, "mode": "trilinear"},
         input=((1, 2, 3, 4, 5), F32)),
    case("layers.Upsample", {"mode": "nearest"}, input=((1, 2, 3, 4, 5), F64)),
    case("layers.Upsample", {"mode": "bilinear"}, input=((2, 3, 5), F32)),
    case("layers.Upsample", {}, input=((2, 3, 5), I64)),
    case("layers.Upsample", {"scale_factor": 0.1}, input=IMG, declines=True),
    case("layers.ConvTranspose2d", {"out_channels": 4}, input=IMG),
    case("layers.ConvTranspose2d", {"out_channels": 4, "kernel_size": [4], "stride": [2],
                                    "padding": [1]}, input=IMG),
    case("layers.ConvTranspose2d", {"out_channels": 6, "kernel_size": [3, 2], "stride": [2, 3],
                                    "padding": [1, 0], "output_padding": [1, 2],
                                    "dilation": [1, 2], "groups": 3, "bias": False},
         input=IMG),
    case("layers.ConvTranspose2d", {"out_channels": 4, "trainable": False, "dtype": "float64"},
         input=((2, 3, 7, 8), F64)),
    case("layers.ConvTranspose2d", {"out_channels": 1, "kernel_size": [2], "bias": False,
                                    "weight": [[1, 2], [3, 4]]}, input=((1, 1, 3, 3), F32)),
    case("layers.ConvTranspose2d", {"out_channels": 1, "kernel_size": [2],
                                    "weight": [[1, 2, 3]]}, input=((1, 1, 3, 3), F32)),
    case("layers.ConvTranspose2d", {"out_channels": 2, "bias_init": [1.0]}, input=IMG),
    case("layers.ConvTranspose2d", {"out_channels": 4, "groups": 2}, input=IMG),
    case("layers.ConvTranspose2d", {"out_channels": 4, "output_padding": [1]}, input=IMG),
    case("layers.ConvTranspose2d", {"out_channels": 4}, input=X3),
    case("layers.ConvTranspose2d", {"out_channels": 4}, input=((2, 3, 7, 8), F64),
         declines=True),
    case("layers.ConvTranspose2d", {"out_channels": 4, "kernel_size": [1], "padding": [3]},
         input=((1, 3, 2, 2), F32), declines=True),
    case("layers.GlobalMaxPool", {}, input=((2, 3, 4), I64), declines=True),
    *(case("losses.CrossEntropy", {"label_smoothing": 0.1, "reduction": r, "scale": scale},
           input=scores, target=target)
      for r in ("mean", "sum", "none") for scale in (1.0, 3.0)
      for scores, target in ((X, ((8,), I64)), (((4, 6, 5), F64), ((4, 6), I64)))),
    case("losses.CrossEntropy", {"label_smoothing": 0.2}, input=X, target=X, declines=True),
    # the volumetric blocks (nodes/layers/volumetric.py)
    case("layers.Conv3d", {"out_channels": 4}, input=((2, 3, 5, 9, 8), F32)),
    case("layers.Conv3d", {"out_channels": 6, "kernel_size": [1, 3, 3], "stride": [1, 2, 2],
                           "padding": [0, 1, 1], "bias": False}, input=((2, 3, 5, 9, 8), F32)),
    case("layers.Conv3d", {"out_channels": 4, "kernel_size": [9]}, input=((2, 3, 5, 9, 8), F32)),
    case("layers.Conv3d", {"out_channels": 4}, input=IMG),
    case("layers.Conv3d", {"out_channels": 4, "padding": "same"},
         input=((2, 3, 5, 9, 8), F32), declines=True),
    case("norm.BatchNorm3d", {}, input=((2, 3, 5, 9, 8), F32)),
    case("norm.BatchNorm3d", {}, input=IMG),
    case("layers.MaxPool3d", {}, input=((2, 3, 5, 9, 8), F32)),
    case("layers.MaxPool3d", {"kernel_size": [1, 3, 3], "stride": [1, 2, 2],
                              "padding": [0, 1, 1]}, input=((2, 3, 5, 9, 8), F32)),
    case("layers.AvgPool3d", {"kernel_size": [2], "ceil_mode": True},
         input=((2, 3, 5, 9, 8), F32)),
    case("layers.AdaptiveAvgPool3d", {"output_size": [2, 3, 2]}, input=((2, 3, 5, 9, 8), F32)),
    case("layers.AdaptiveAvgPool3d", {}, input=IMG),
]


def _spec_params(block: str, params: dict):
    spec = nodegraph.default_registry().get(block)
    values, bad = spec.resolve_params(params)
    assert not bad, bad
    return spec, values


def _outcome(fn):
    """What `fn()` gives, or the error it raises as (class, port, message)."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 (compared below)
        return type(e).__name__, getattr(e, "port", None), str(e)


@pytest.mark.parametrize(("block", "params", "inputs", "declines"), CASES)
def test_rule_equals_meta_path(block, params, inputs, declines):
    spec, p = _spec_params(block, params)
    assert spec.shape is not None, f"{block} declares no shape rule"
    meta = {k: torch.empty(s, dtype=d, device="meta") for k, (s, d) in inputs.items()}
    x = {k: shapes.TensorMeta(s, d) for k, (s, d) in inputs.items()}
    ruled = _outcome(lambda: spec.shape(p, x))
    without_rule = dataclasses.replace(spec, shape=None)
    dtype = dtypes.node_dtype(spec, p, DEFAULTS)  # the node's own dtype param, else float32
    expected = _outcome(lambda: _infer_op(without_rule, p, meta, OpCache(), dtype))
    if declines:
        assert ruled is None
        return
    assert ruled is not None, "the rule declined a case it should answer"
    if isinstance(expected, tuple) and isinstance(expected[0], str):  # an error
        assert ruled == expected
        return
    assert isinstance(ruled, shapes.Inferred), ruled
    outs, count, nbytes = expected
    assert ruled.outputs == tuple((tuple(t.shape), t.dtype) for t in outs)
    assert (ruled.count, ruled.nbytes) == (count, nbytes)


def test_every_rule_is_tested():
    tested = {c.values[0] for c in CASES}
    ruled = {s.id for s in nodegraph.default_registry() if s.shape is not None}
    assert ruled <= tested, sorted(ruled - tested)
    assert {"layers.Linear", "activations.Tanh", "losses.MSE",
            "losses.BCEWithLogits", "losses.CrossEntropy"} <= ruled


def test_validation_uses_rules_and_reports_their_errors(monkeypatch):
    """xor and a chain of Linear/Tanh validate without running any meta forward, and a rule's
    error is reported as the meta path's was: on the node and port."""
    def refuse(*args):
        raise AssertionError("a meta forward ran")

    monkeypatch.setattr(footprint, "run_counted", refuse)
    report = nodegraph.validate(nodegraph.load(ROOT / "examples" / "xor.json"),
                                for_training=True, cache=OpCache())
    assert report.ok, report.problems
    assert report.param_counts == {"hidden": 12, "act": 0, "out": 5, "loss": 0}
    assert report.shape("out", "output") == (4, 1)
    g = nodegraph.Graph("bad")
    g.add("data.XOR", id="data")
    g.add("layers.Linear", id="fc", out_features=3, in_features=5)
    g.connect(("data", "x"), ("fc", "input"))
    report = nodegraph.validate(g, cache=OpCache())
    [problem] = report.errors
    assert (problem.node, problem.port) == ("fc", "input")
    assert "expects (N, 5) but receives (N, 2)" in problem.message


def test_a_too_large_layer_is_blamed_through_its_rule(monkeypatch):
    """The memory check's search for the param to lower uses the rule too (no meta build)."""
    monkeypatch.setattr(footprint, "run_counted", lambda *a: pytest.fail("meta forward"))
    g = nodegraph.load(ROOT / "examples" / "xor.json")
    g.set_param("hidden", "out_features", 10**12)
    with footprint.memory_limit(8 * 2**30):
        report = nodegraph.validate(g, for_training=True, cache=OpCache())
    assert [(p.node, p.port) for p in report.errors] == [("hidden", "out_features")]


def test_validate_xor_imports_no_dynamo_or_sympy():
    """Validation of xor runs no meta kernel and builds its optimizer without torch._dynamo
    (seconds of start-up); an optimizer built afterwards goes through torch's own wrapper
    again, which imports it."""
    code = ("import sys, torch, nodegraph; from nodegraph.check.opcache import OpCache; "
            "r = nodegraph.validate(nodegraph.load(sys.argv[1]), for_training=True, "
            "cache=OpCache()); assert r.ok, r.problems; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'sympy' "
            "or m.startswith('torch._dynamo'))); "
            "torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))]); "
            "print('torch._dynamo' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(ROOT / "examples" / "xor.json")],
                         capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.split() == ["[]", "True"]


def test_small_examples_validate_without_dynamo():
    """The hand-set threshold units and worked examples (Linear with given weights) validate
    by their rules alone: torch._dynamo, which torch's meta kernels import (about a second
    of a cold `nodegraph validate`), is not imported by any of them."""
    code = ("import sys, nodegraph; from nodegraph.check.opcache import OpCache\n"
            "for path in sys.argv[1:]:\n"
            "    r = nodegraph.validate(nodegraph.load(path), for_training=True, "
            "cache=OpCache())\n"
            "    print(r.ok, 'torch._dynamo' in sys.modules)")
    names = ["mlp_212", "xor_tlu", "nand_tlu", "backprop_appendix", "conv_arithmetic",
             "edge_detection"]
    out = subprocess.run([sys.executable, "-c", code,
                          *(str(ROOT / "examples" / f"{n}.json") for n in names)],
                         capture_output=True, text=True, check=True, cwd=ROOT)
    assert dict(zip(names, out.stdout.splitlines(), strict=True)) == {
        n: "True False" for n in names}


def test_constant_rule_refuses_a_ragged_value_as_the_build_does():
    """torch.tensor on the meta device takes [[1, 2], [3]] as (2, 2), so the meta path
    passes what building the graph refuses; the rule reports the build's error."""
    spec, p = _spec_params("layers.Constant", {"value": [[1, 2], [3]], "dtype": "int64"})
    built = _outcome(lambda: spec.build(p, {}))
    assert built[0] == "ParamError" and "rectangular" in built[2]
    assert _outcome(lambda: spec.shape(p, {})) == built


def _summary(report):
    return (sorted((p.node, p.port, p.kind, p.message) for p in report.problems),
            report.param_counts,
            {k: (tuple(v.shape), v.dtype) for k, v in report.outputs.items()},
            report.module_bytes, report.memory.total if report.memory else None)


@pytest.mark.slow
@pytest.mark.parametrize("path", sorted((ROOT / "examples").glob("*.json")),
                         ids=lambda p: p.stem)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_every_example_validates_the_same_with_rules_as_without(path, dtype, monkeypatch):
    graph = nodegraph.load(path)
    if dtype != "float32":  # the whole graph in another dtype: rules read it from training
        graph.set_training("dtype", dtype)
    ruled = _summary(nodegraph.validate(graph, for_training=True, cache=OpCache()))
    monkeypatch.setattr(shapes, "infer", lambda rule, params, inputs: None)
    assert ruled == _summary(nodegraph.validate(graph, for_training=True, cache=OpCache()))
