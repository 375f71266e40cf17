# txnwatch container image: the daemon and its migrations (`txnwatch run`, `txnwatch migrate`).
#
#   scripts/build-image.sh            builds it here with podman, from a Debian base made by debootstrap
#   podman build --build-arg BASE=<image with python3 and python3-venv> -t txnwatch .   (after the wheels step
#   of scripts/build-image.sh has filled build/image/)
#
# BASE must hold Debian's python3 and python3-venv (any Debian/Ubuntu image with them does, e.g.
# debian:bookworm-slim after `apt-get install python3-venv`); scripts/build-image.sh makes one from
# Debian packages so no registry is needed. The image runs as uid 10001 with a read-only root: it
# writes only to /var/lib/txnwatch (SQLite file, Parquet archive; mount a volume there) and /tmp.
#
# Targets: `daemon` (default) and `pipeline` (adds PySpark; needs a BASE that also holds Java 17,
# e.g. --build-arg BASE=<base with openjdk-17-jre-headless> --target pipeline;
# TXNWATCH_IMAGE_TARGET=pipeline scripts/build-image.sh makes that base and tags <version>-pipeline).
ARG BASE=localhost/txnwatch-base:latest

FROM ${BASE} AS daemon
# txnwatch.__version__ (scripts/build-image.sh passes it; the tag carries it too): the image's version label.
ARG VERSION=unknown
# One step, so the image is one layer over the base (quick with podman's vfs storage, too). The build
# never reaches a package index: scripts/build-image.sh puts the pinned dependency wheels (pyproject.toml's
# dependencies + the archive extra, at constraints.txt's versions) in build/image/deps and txnwatch's own
# wheel (static files included) in build/image/app; the build context is bind-mounted, never copied in.
# pip compiles the bytecode at install time, so nothing is written under a read-only root later; pip and
# setuptools leave the venv afterwards.
RUN --mount=type=bind,target=/context \
    useradd --uid 10001 --user-group --home-dir /var/lib/txnwatch --no-create-home \
            --shell /usr/sbin/nologin txnwatch \
 && install -d -o 10001 -g 10001 -m 0750 /var/lib/txnwatch \
 && python3 -m venv /opt/txnwatch \
 && PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore \
    /opt/txnwatch/bin/pip install -q --find-links /context/build/image/deps \
        /context/build/image/deps/*.whl /context/build/image/app/*.whl \
 && /opt/txnwatch/bin/pip uninstall -q -y pip setuptools \
 && install -d /opt/txnwatch/share \
 && cp -r /context/alembic.ini /context/alembic /opt/txnwatch/share/ \
 && find /opt/txnwatch/share -name __pycache__ -prune -exec rm -rf {} +
ENV PATH=/opt/txnwatch/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    TXNWATCH_ALEMBIC_DIR=/opt/txnwatch/share \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/var/lib/txnwatch
WORKDIR /var/lib/txnwatch
EXPOSE 8080 8081
USER 10001:10001
ENTRYPOINT ["txnwatch"]
CMD ["run"]
LABEL org.opencontainers.image.title="txnwatch" \
      org.opencontainers.image.description="Observability and alerting for Apache Kafka transactions" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}"

FROM daemon AS pipeline
# `txnwatch pipeline run` with a local Spark (the chart's CronJob, `local[*]` in the pod) or as the driver
# of a Spark cluster. TXNWATCH_IMAGE_TARGET=pipeline scripts/build-image.sh puts PySpark's wheels in
# build/image/pipeline and builds BASE with Debian's openjdk-17-jre-headless. The build fails here, with
# the reason, if BASE has no Java 17+ or PySpark does not import: an image that cannot run the rollups
# never gets a tag. Spark writes only under /tmp (SPARK_LOCAL_DIRS, the JVM's scratch files) and HOME.
USER 0:0
RUN --mount=type=bind,target=/context \
    { command -v java >/dev/null \
      || { echo "the pipeline target needs a BASE with Java 17+ (Debian: openjdk-17-jre-headless)" >&2; exit 1; }; } \
 && python3 -m venv /opt/txnwatch \
 && PIP_NO_INDEX=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore \
    /opt/txnwatch/bin/pip install -q --find-links /context/build/image/pipeline /context/build/image/pipeline/*.whl \
 && /opt/txnwatch/bin/pip uninstall -q -y pip setuptools \
 && java -version \
 && /opt/txnwatch/bin/python -c "import pyspark, txnwatch.pipeline.session as s; s.check_java(); print('pyspark', pyspark.__version__)"
ENV SPARK_LOCAL_DIRS=/tmp
USER 10001:10001
LABEL org.opencontainers.image.title="txnwatch-pipeline" \
      org.opencontainers.image.description="txnwatch's PySpark rollups over the Parquet history archive (Java 17, PySpark)"
