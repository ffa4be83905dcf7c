"""`procedures.*`: loops around a trained model. `core`: general ones; `decoding`: text
generation; `energy`: Hopfield/Boltzmann recall and sampling; `generative`: samplers of
generative models."""
