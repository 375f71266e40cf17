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
# Targets: `daemon` (default, last) and `pipeline` (adds PySpark; needs a BASE that also holds Java 17,
# e.g. --build-arg BASE=<base with openjdk-17-jre-headless> --target pipeline).
# Python bytecode is compiled by pip at install time, so nothing is written under a read-only root.
ARG BASE=localhost/txnwatch-base:latest

FROM ${BASE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore PIP_NO_INDEX=1
# The build never reaches a package index: scripts/build-image.sh puts the pinned dependency wheels
# (pyproject.toml's dependencies + EXTRAS, at constraints.txt's versions) in build/image/deps and
# txnwatch's own wheel (static files included) in build/image/app.
# Dependencies first: a source edit does not redo this layer.
COPY build/image/deps /wheels/deps
RUN python3 -m venv /opt/txnwatch \
 && /opt/txnwatch/bin/pip install -q --find-links /wheels/deps /wheels/deps/*.whl
COPY build/image/app /wheels/app
RUN /opt/txnwatch/bin/pip install -q --no-deps /wheels/app/*.whl \
 && /opt/txnwatch/bin/pip uninstall -q -y pip setuptools

FROM ${BASE} AS pipeline-build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore PIP_NO_INDEX=1
# build/image/pipeline holds the pipeline extra's wheels (TXNWATCH_IMAGE_TARGET=pipeline).
COPY --from=build /opt/txnwatch /opt/txnwatch
COPY build/image/pipeline /wheels/pipeline
RUN python3 -m venv /opt/txnwatch \
 && /opt/txnwatch/bin/pip install -q --find-links /wheels/pipeline /wheels/pipeline/*.whl \
 && /opt/txnwatch/bin/pip uninstall -q -y pip setuptools

FROM ${BASE} AS runtime
# Root's chores in one layer: the unprivileged user and the one writable directory.
RUN useradd --system --uid 10001 --user-group --home-dir /var/lib/txnwatch --no-create-home --shell /usr/sbin/nologin txnwatch \
 && install -d -o 10001 -g 10001 -m 0750 /var/lib/txnwatch
COPY alembic.ini /opt/txnwatch/share/alembic.ini
COPY alembic /opt/txnwatch/share/alembic
# Bytecode is compiled at build time; a read-only root must not be written at run time.
ENV PATH=/opt/txnwatch/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    TXNWATCH_ALEMBIC_DIR=/opt/txnwatch/share \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/var/lib/txnwatch
WORKDIR /var/lib/txnwatch
EXPOSE 8080
USER 10001:10001
ENTRYPOINT ["txnwatch"]
CMD ["run"]

FROM runtime AS pipeline
COPY --from=pipeline-build /opt/txnwatch /opt/txnwatch

FROM runtime AS daemon
COPY --from=build /opt/txnwatch /opt/txnwatch
LABEL org.opencontainers.image.title="txnwatch" \
      org.opencontainers.image.description="Observability and alerting for Apache Kafka transactions" \
      org.opencontainers.image.licenses="Apache-2.0"
