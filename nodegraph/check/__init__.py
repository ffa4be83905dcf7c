"""Everything knowable about a graph before it runs: structure, shapes, memory.

- `validate`: structural checks and shape inference, problems keyed by node and port
- `footprint`: the memory a graph would need, estimated before anything large is allocated
"""
