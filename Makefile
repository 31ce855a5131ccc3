# make demo   set-up + the main job (old vs new rebalance, a migration there and back, the PySpark report)
# make test   set-up + the whole suite
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup peers demo test soak lint bench bench-compare check-java clean

setup: check-java $(STAMP) peers

check-java:
	@command -v java >/dev/null 2>&1 || [ -x "$$JAVA_HOME/bin/java" ] || { \
	  echo "zkcoord needs a Java runtime (17 or newer) to run ZooKeeper."; \
	  echo "  Debian/Ubuntu: sudo apt-get install -y openjdk-17-jdk-headless"; \
	  echo "  macOS:         brew install openjdk@17"; \
	  echo "  or set JAVA_HOME to an installed JDK."; exit 1; }
	@command -v mvn >/dev/null 2>&1 || { \
	  echo "zkcoord needs Maven (mvn) to resolve Apache Kafka's jars, the peers of its tests and demo."; \
	  echo "  Debian/Ubuntu: sudo apt-get install -y maven"; \
	  echo "  macOS:         brew install maven"; exit 1; }

$(STAMP): setup.cfg pyproject.toml setup.py zkcoord/log/_compiled.c zkcoord/log/_fsync.c
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# Kafka's own jars (the 0.8.2 consumer, the 3.9 and 4.1 brokers, 1.1.1's rebalance check) through Maven into ~/.cache/zkcoord/peers, once.
peers: $(STAMP)
	$(BIN)/zkcoord peers fetch

demo: setup
	$(BIN)/zkcoord demo

# Two workers, a test file each at a time: most integration time is spent waiting on sessions and processes, so
# the two cores overlap it (about 11 instead of 17 minutes); a file's module fixtures are set up once.
TEST_WORKERS ?= 2

test: setup
	$(BIN)/python -m pytest -rs -n $(TEST_WORKERS) --dist loadfile

# The fault campaign resumes where $(FAULTS_OUT)/runs.jsonl stops: remove the directory for a fresh one.
FAULTS_OUT ?= var/faults-soak
FAULT_RUNS ?= 200

soak: setup
	$(BIN)/python -m pytest -rs -m soak
	$(BIN)/zkcoord faults run --runs $(FAULT_RUNS) --seed 1000 --out $(FAULTS_OUT)

lint: setup
	$(BIN)/ruff check zkcoord tests benchmarks
	$(BIN)/ruff format --check zkcoord tests benchmarks
	$(BIN)/lint-imports

bench: setup
	$(BIN)/python benchmarks/legacy_rebalance.py
	$(BIN)/python benchmarks/offsets_log.py
	$(BIN)/python benchmarks/coordinator.py
	$(BIN)/python benchmarks/client_rebalance.py
	$(BIN)/python benchmarks/migration.py
	$(BIN)/python benchmarks/pipeline.py
	$(BIN)/python benchmarks/offsets_audit.py
	$(BIN)/python benchmarks/gateway.py
	$(BIN)/python benchmarks/gateway_failover.py
	$(BIN)/python benchmarks/member_migration.py
	$(BIN)/python benchmarks/security.py
	$(BIN)/python benchmarks/versus_kafka.py --members 10,100,1000

# Every variant of the comparison at 10 and 50 members, KIP-848 on Kafka 4 included, and the report's table: hours
# on 2 cores (docs/compare.md, "Every variant at once"); COMPARE_ARGS narrows it (--scenario, --variants, --members).
COMPARE_ARGS ?=
bench-compare: setup
	$(BIN)/python benchmarks/compare_all.py --members 10,50 $(COMPARE_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info zkcoord/log/_compiled*.so zkcoord/log/_fsync*.so
