# Trellis build and test entry points. `make test` is what CI runs.

GO ?= go
# Fuzz targets run briefly on every test run; raise for a longer search.
# A count, not a duration: with a duration, Go 1.26's fuzzing coordinator
# can fail a target that found nothing ("context deadline exceeded" right
# at the deadline, no crasher written; go.dev/issue/75804, fixed in 1.27).
FUZZTIME ?= 2000x

# The Jepsen matrix: every nemesis with default and with ?consistent reads,
# JEPSEN_DURATION of workload each (8 runs); histories, summaries and
# porcupine's visualizations go to JEPSEN_OUT, the test output to
# JEPSEN_OUT/jepsen.log. Raise JEPSEN_TIMEOUT with the duration: each run
# takes about JEPSEN_DURATION plus a minute.
JEPSEN_DURATION ?= 3m
JEPSEN_OUT ?= $(CURDIR)/jepsen-out
JEPSEN_TIMEOUT ?= 4h

.PHONY: test unit race fuzz vet lint build bench gobench jepsen soak compat

build:
	$(GO) build ./...

vet:
	$(GO) vet ./...

# golangci-lint (.golangci.yml) at the version pinned in tools/go.mod, a
# module of its own so that its dependencies stay out of go.mod. Nothing to
# install: the first run builds it (a few minutes on a cold build cache).
lint:
	$(GO) tool -modfile=tools/go.mod golangci-lint run ./...

# The whole suite: vet, lint, every package under the race detector (the
# integration scenarios start real processes and run here too), then a
# short pass of every fuzz target.
test: vet lint race fuzz

race:
	$(GO) test -race -timeout 20m ./...

# Quick feedback: no race detector, no multi-process scenarios.
unit:
	$(GO) test -short ./...

# Every FuzzXxx target in the tree, each for FUZZTIME.
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  dir=$$($(GO) list -f '{{.Dir}}' $$pkg); \
	  for t in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | sed 's/^func //'); do \
	    echo "fuzz $$pkg $$t"; \
	    $(GO) test $$pkg -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) > /tmp/trellis-fuzz.log 2>&1 || { cat /tmp/trellis-fuzz.log; exit 1; }; \
	  done; \
	done

# The short run (one nemesis, 30 s) is TestJepsenLinearizable in `make
# test`; this is the whole matrix, which takes a while.
jepsen:
	@mkdir -p $(JEPSEN_OUT)
	@echo "jepsen: 8 runs of $(JEPSEN_DURATION); log in $(JEPSEN_OUT)/jepsen.log"
	@TRELLIS_JEPSEN_MATRIX=1 TRELLIS_JEPSEN_DURATION=$(JEPSEN_DURATION) TRELLIS_JEPSEN_OUT=$(JEPSEN_OUT) \
	  $(GO) test ./integration/ -run '^(TestJepsenCheckerCatchesStaleReads|TestJepsenMatrix)$$' -count=1 -v -timeout $(JEPSEN_TIMEOUT) \
	  > $(JEPSEN_OUT)/jepsen.log 2>&1; rc=$$?; \
	  grep -E '^ *--- |jepsen: [0-9]+ operations|findings|^        (history|  key|write applied|false failure|servers disagree|problem|files)' $(JEPSEN_OUT)/jepsen.log | cut -c1-400; \
	  exit $$rc

# `trellis bench` at BENCH_SCALE against a -dev agent and a 3-server
# cluster with Raft on disk, both started (and killed by PID) by
# bench/internal/benchreport on loopback ports below 32768; writes
# bench/results/<date>.md and its SVG chart (bench/README.md).
BENCH_SCALE ?= small
bench:
	$(GO) run ./bench/internal/benchreport -scale $(BENCH_SCALE) -out bench/results

# Every Go benchmark once, with -benchmem.
gobench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

# A soak, not a speed test: catalog churn for SOAK_MINUTES; fails unless
# heap, goroutines and open files stay flat (docs/consistency.md).
SOAK_MINUTES ?= 10
soak:
	TRELLIS_SOAK_MINUTES=$(SOAK_MINUTES) $(GO) test ./server -run '^$$' -bench SoakCatalogChurn -benchtime 1x -timeout $$(( $(SOAK_MINUTES) + 10 ))m

# consul/api's own test suite (the module and version in go.mod, the api
# and api/watch packages) against trellis: sdk/testutil starts `consul`,
# which here is the trellis binary under that name. A measurement, not a
# gate, so not part of `make test`: prints passed/failed/skipped per
# package, writes the failing tests with their first failure line to
# COMPAT_OUT/failures.txt and each test's `go test -json` events to
# COMPAT_OUT/json/. Each top-level test runs alone in its own test binary
# process (COMPAT_JOBS at a time), bounded by COMPAT_TIMEOUT: a test that
# hangs or panics fails by itself ("did not finish") instead of stalling
# or killing the rest of its package. COMPAT_RUN narrows it to the tests
# matching a regexp.
COMPAT_OUT ?= $(CURDIR)/compat-out
COMPAT_TIMEOUT ?= 5m
COMPAT_JOBS ?= 3
COMPAT_RUN ?= .
compat:
	@rm -rf $(COMPAT_OUT) && mkdir -p $(COMPAT_OUT)/bin $(COMPAT_OUT)/json
	$(GO) build -o $(COMPAT_OUT)/bin/consul ./cmd/trellis
	sh internal/compatreport/compat.sh "$(GO)" "$(COMPAT_OUT)" "$(COMPAT_TIMEOUT)" "$(COMPAT_JOBS)" '$(COMPAT_RUN)'
	$(GO) run ./internal/compatreport -in $(COMPAT_OUT)/json -failures $(COMPAT_OUT)/failures.txt
	@echo "compat: failing tests in $(COMPAT_OUT)/failures.txt"
