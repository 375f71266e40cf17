"""The collecting services: the per-cluster poll loop and the transaction-log tails (the process-wide poll window that pauses the cyclic GC while they run is core/pollwindow.py)."""
