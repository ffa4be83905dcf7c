"""What blocks of one kind share, because the compiler and trainer rely on it.

- `dataset`: what a data block builds (whole tensors, split once, batched)
- `metric`: values accumulated over a split; `optim`: optimizer and schedule params
"""
