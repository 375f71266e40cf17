# The two commands.  Everything they need is installed by scripts/bootstrap.sh.
.PHONY: run test

# Start a local lab Kafka cluster with a demo workload (a hanging transaction and an
# LSO stall included) and txnwatch on SQLite: REST + /metrics on http://127.0.0.1:8080.
run:
	@bash scripts/bootstrap.sh
	@.venv/bin/txnwatch demo

# Install test dependencies (PostgreSQL, promtool, helm, Java, Kafka jars) and run the whole suite.
test:
	@bash scripts/bootstrap.sh --test
	@bash scripts/test.sh
