"""Training: the sharded, jit-compiled step scanned over chunks (`pinnkit.train.loop.fit`),
time windows, loss weighting, adaptive point sets and the collocation sampler."""
