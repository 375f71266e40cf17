"""The one compiled part of txnwatch; everything else is in pyproject.toml.

``txnwatch.kafka._txnlog_walk`` (the transaction-log tail's batch walk, issue 25) is optional: where no C
compiler is, pip installs txnwatch without it and the tail reads through the same walk in Python
(``txnwatch.kafka.txnlog_batches``), slower and with the same records; the tail then says so once in its log,
and ``tests/kafka/test_txnlog_walk.py`` fails on such a checkout.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("txnwatch.kafka._txnlog_walk", ["service/txnwatch/kafka/_txnlog_walk.c"],
                             extra_compile_args=["-O2", "-std=c11"], optional=True)])
