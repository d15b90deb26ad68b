"""Slurm sources: the cluster read through its commands or through slurmrestd."""
