"""The only code in txnwatch that talks to Kafka.

``ClusterConnection(settings).poll()`` turns one poll of one cluster into a
:class:`txnwatch.core.model.ClusterSnapshot`, in a few concurrent, per-broker batched round
trips; failures of single requests are recorded in the snapshot, and only a cluster
that answers nothing raises :class:`ClusterUnreachable`.  :class:`TransactionLogTail`
follows ``__transaction_state`` for exact coordinator transitions.

Importing this package bounds what kafka-python may decompress from one record batch
(:func:`txnwatch.kafka.decompress.bound_kafka_python`): every consumer of the daemon
reads tenants' bytes, and kafka-python has no setting for it.
"""

from txnwatch.core.model import AbortOutcome
from txnwatch.kafka.connection import ClusterConnection
from txnwatch.kafka.decompress import bound_kafka_python
from txnwatch.kafka.errors import ClusterUnreachable
from txnwatch.kafka.settings import ClusterConnectionSettings
from txnwatch.kafka.txnlog import TransactionLogTail, TxnLogUnavailable

bound_kafka_python()

__all__ = ["AbortOutcome", "ClusterConnection", "ClusterConnectionSettings", "ClusterUnreachable",
           "TransactionLogTail", "TxnLogUnavailable"]
