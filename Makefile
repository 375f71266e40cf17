# The commands.  Everything they need is installed by scripts/bootstrap.sh.
.PHONY: run test test-fast release

# Start a local lab Kafka cluster with a demo workload (a hanging transaction and an
# LSO stall included) and txnwatch on SQLite: REST + /metrics on http://127.0.0.1:8080.
# DEMO_ARGS go to `txnwatch demo` (e.g. DEMO_ARGS="--port 18080").
DEMO_ARGS ?=
run:
	@bash scripts/bootstrap.sh
	@.venv/bin/txnwatch demo $(DEMO_ARGS)

# Install test dependencies (the test, pipeline and archive extras; PostgreSQL, promtool, helm, Java, Kafka jars)
# and run the whole suite.
test:
	@bash scripts/bootstrap.sh --test
	@bash scripts/test.sh

# The pure, unit and in-process API tests (SQLite only), after the same lint gates: no Kafka lab, PostgreSQL,
# Spark or browser (a test that would start one fails and names the marker it lacks), spread over every core
# with pytest-xdist (-n auto; TEST_FAST_WORKERS=0 for one process). ~140 s on two quiet cores (docs/contributing.md).
TEST_FAST_WORKERS ?= auto
test-fast:
	@bash scripts/bootstrap.sh --test-python
	@TXNWATCH_TEST_LANE=fast bash scripts/test.sh -m "not lab and not postgres and not spark and not browser and not slow" -q -n $(TEST_FAST_WORKERS)

# Build a release's wheel, packaged chart and image into dist/ with SHA256SUMS, publishing nothing
# (docs/releasing.md; RELEASE_ARGS="--draft" before the CHANGELOG is cut, "--no-image" without podman).
RELEASE_ARGS ?=
release:
	@bash scripts/bootstrap.sh --test
	@bash scripts/release.sh $(RELEASE_ARGS)
