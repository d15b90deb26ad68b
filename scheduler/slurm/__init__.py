"""The Slurm wing: reading one cluster into the store (poller, sources, worker, digest)."""
