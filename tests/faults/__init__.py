"""Fault-and-hostile-input tests (issue 15): outages, oversized bodies, hostile secrets, tokens, dates."""
