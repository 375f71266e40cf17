"""The admin actions on a cluster, one use case for both doors (`POST /api/v1/admin/abort`, `txnwatch abort`).

Today one kind: abort the open transaction on a partition (WriteTxnMarkers, as ``kafka-transactions.sh abort``).
Each kind is a small command type (commands.py); the guard (guard.py), the write-ahead audit (audit.py) and the
use case (execute.py: intent, Kafka, outcome) are the same for every kind, so a second one (abort by
transactional id, Kafka 4.1's forceTerminateTransaction) is a command type and a Kafka call, nothing else.
This room talks to no Kafka code itself: the composition root wires the calls (txnwatch.runtime.wiring).
"""
