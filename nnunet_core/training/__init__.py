"""Training: losses, deep supervision and (later) the training loop."""
