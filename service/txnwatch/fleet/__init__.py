"""Fleets of replicas on one PostgreSQL: per-cluster leases, heartbeats and balancing (see docs/fleet.md).

``balance`` is the pure rule (who should take or give up what), ``table`` its SQL,
``leases`` this replica's view with the local deadlines and the fencing checks.
"""
