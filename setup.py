"""The two compiled parts of txnwatch; everything else is in pyproject.toml.

Both are the transaction-log tail's (issue 25), and both are optional: where no C compiler is, pip installs
txnwatch without them and the tail runs their Python twins, slower and with the same results, and says so once
in its log.  ``tests/kafka/test_txnlog_walk.py`` and ``tests/store/test_stream_params.py`` fail on such a checkout.

* ``txnwatch.kafka._txnlog_walk``: the batch walk (twin: ``txnwatch.kafka.txnlog_batches``);
* ``txnwatch.store._stream_params``: the parameters of the stream rows' INSERTs on SQLite (twin:
  ``txnwatch.store.txnlog.stream_rows``).
"""

from setuptools import Extension, setup

_FLAGS = ["-O2", "-std=c11"]
setup(ext_modules=[Extension("txnwatch.kafka._txnlog_walk", ["service/txnwatch/kafka/_txnlog_walk.c"],
                             extra_compile_args=_FLAGS, optional=True),
                   Extension("txnwatch.store._stream_params", ["service/txnwatch/store/_stream_params.c"],
                             extra_compile_args=_FLAGS, optional=True)])
