# Trellis build and test entry points. `make test` is what CI runs.

GO ?= go
# Fuzz targets run briefly on every test run; raise for a longer search.
# A count, not a duration: with a duration, Go 1.26's fuzzing coordinator
# can fail a target that found nothing ("context deadline exceeded" right
# at the deadline, no crasher written; go.dev/issue/75804, fixed in 1.27).
FUZZTIME ?= 2000x

.PHONY: test unit race fuzz vet build bench

build:
	$(GO) build ./...

vet:
	$(GO) vet ./...

# The whole suite: vet, every package under the race detector (the
# integration scenarios start real processes and run here too), then a
# short pass of every fuzz target.
test: vet race fuzz

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

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...
