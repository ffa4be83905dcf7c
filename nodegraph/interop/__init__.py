"""Graphs to and from plain PyTorch.

- `export`: Python source, ONNX or weights from a graph
- `importing`: a PyTorch module traced (torch.fx or torch.export) into a graph file
"""
