"""Archive tables as DataFrames: only the files the manifest lists, only the days asked for.

Reading the manifest's file list (not a directory listing) is what makes the
exporter's crash recovery hold on the read side too: orphans are never seen.
Pruning by the ``date=`` directory in Python keeps Spark from even listing old days.
"""

from __future__ import annotations

import posixpath
import re
from datetime import date

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from txnwatch.store.archive import TABLES, Manifest, open_archive, read_manifest

_DATE = re.compile(r"/date=(\d{4}-\d{2}-\d{2})/")

_SPARK_TYPES: dict[pa.DataType, T.DataType] = {
    pa.int64(): T.LongType(), pa.int32(): T.IntegerType(), pa.string(): T.StringType(),
    pa.bool_(): T.BooleanType(), pa.float64(): T.DoubleType(),
    pa.timestamp("us", tz="UTC"): T.TimestampType(), pa.list_(pa.string()): T.ArrayType(T.StringType()),
}


def spark_schema(schema: pa.Schema) -> T.StructType:
    """The archive schema as Spark sees it once read, hive partition columns included."""
    fields = [T.StructField(f.name, _SPARK_TYPES[f.type], f.nullable) for f in schema]
    return T.StructType([*fields, T.StructField("cluster", T.StringType()), T.StructField("date", T.StringType())])


def spark_root(archive_uri: str) -> str:
    if "://" in archive_uri:
        return archive_uri.rstrip("/")
    _, root = open_archive(archive_uri)
    return "file://" + root


def selected_files(manifest: Manifest, table: str, since: date | None, until: date | None) -> list[str]:
    chosen = []
    for path in sorted(manifest.table(table).files):
        found = _DATE.search("/" + path)
        day = date.fromisoformat(found.group(1)) if found else None
        if day is not None and ((since and day < since) or (until and day > until)):
            continue
        chosen.append(path)
    return chosen


def load_table(spark: SparkSession, archive_uri: str, manifest: Manifest, table: str,
               since: date | None = None, until: date | None = None) -> DataFrame:
    schema = spark_schema(TABLES[table].schema)
    files = selected_files(manifest, table, since, until)
    if not files:
        return spark.createDataFrame([], schema)
    root = spark_root(archive_uri)
    return (spark.read.option("basePath", posixpath.join(root, table))
            .schema(schema).parquet(*(posixpath.join(root, f) for f in files)))


def load_archive(spark: SparkSession, archive_uri: str, since: date | None = None,
                 until: date | None = None) -> tuple[dict[str, DataFrame], dict[str, int]]:
    """All history tables plus the row counts the manifest promises (free progress figures)."""
    fs, root = open_archive(archive_uri)
    manifest = read_manifest(fs, root)
    frames, counts = {}, {}
    for name in TABLES:
        frames[name] = load_table(spark, archive_uri, manifest, name, since, until)
        state = manifest.table(name)
        counts[name] = sum(state.files[f] for f in selected_files(manifest, name, since, until))
    return frames, counts
