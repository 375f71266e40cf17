"""Everything Prometheus: the /metrics collectors over the latest views, our own poll counters, and the exposition rendered once per poll."""
