"""The transactional canary: an active check of its own (KMinion's ``e2e/``), apart from what is polled.

``probe.py`` runs one cluster's rounds (its Kafka calls are a :class:`~txnwatch.canary.probe.CanaryCalls`, wired
by txnwatch.runtime to txnwatch.kafka.canary); ``service.py`` gives each enabled cluster a thread of its own, so
a canary waiting on a dead coordinator never delays a poll.
"""
