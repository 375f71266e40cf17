"""The lab: real Apache Kafka clusters on this machine, a workload generator, fault injection, and
Kafka's own kafka-transactions tool as the reference.  See README.md in this folder.

Modules: cluster (up/down, broker lifecycle), settings (server.properties), jars (Maven cache),
proxy (latency / connection cuts), faults, workload, reference, pytest_plugin, cli.
"""
