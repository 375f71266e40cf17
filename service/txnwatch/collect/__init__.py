"""The collecting services: the per-cluster poll loop, the transaction-log tails, and the process-wide poll window that pauses the cyclic GC while polls run."""
