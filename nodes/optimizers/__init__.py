"""`optimizers.*`: optimizer blocks. `core`: torch's optimizers, L-BFGS and the least-squares
solver; `proximal`: proximal gradient descent (the lasso's solver)."""
