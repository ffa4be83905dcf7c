"""Graphs to and from plain PyTorch.

- `export`: Python source, ONNX or weights from a graph
- `fx_import`: a PyTorch module traced with torch.fx into a graph file
"""
