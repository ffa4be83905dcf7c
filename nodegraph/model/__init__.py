"""What a graph is: blocks' declarations, port types, the graph itself, groups and the file.

The bottom layer. Nothing here builds a tensor or runs a block; everything above imports it.
- `errors`: problems as data and the exceptions that carry them
- `types`: port types and what may connect to what
- `spec`: how a block declares itself; the registry of declarations
- `graph`: nodes, wires, params, ties, groups, training settings and UI data, changed only
  through its methods, with change events (`events`); `readonly`: how it shows them
- `groups`: a set of nodes saved under a name and used as one block
- `fileformat`: the JSON file, loaded defensively and saved atomically; `outputs`: files a
  run writes; `allowlist`: what Python a file may name; `settings`: the `training` section
"""
