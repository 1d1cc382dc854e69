#!/bin/sh
# Runs consul/api's test suite against trellis for `make compat` (see the
# Makefile for the variables). Each top-level test runs alone in its own
# test binary process, so that a test that hangs (bounded by TIMEOUT) or
# panics fails by itself instead of taking the rest of its package with it.
#
# Usage: compat.sh GO OUT TIMEOUT JOBS RUN
set -eu
GO=$1 OUT=$2 TIMEOUT=$3 JOBS=$4 RUN=$5

src=$($GO list -m -f '{{.Dir}}' github.com/hashicorp/consul/api)
work=$(mktemp -d)
# The module cache is read-only: copy it, and make the copy removable.
trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT
cp -r "$src/." "$work/"
chmod -R u+w "$work"
echo "compat: $(basename "$src") copied to $work"

for pkg in api api/watch; do
	dir=$work/${pkg#api}
	name=$(echo "$pkg" | tr / -)
	(cd "$dir" && GOWORK=off $GO test -c -o "$OUT/bin/$name.test" .)
	echo "compat: running github.com/hashicorp/consul/$pkg, $JOBS at a time"
	(cd "$dir" && "$OUT/bin/$name.test" -test.list "$RUN") | grep '^Test' |
		PATH=$OUT/bin:$PATH DIR=$dir BIN=$OUT/bin/$name.test JSON=$OUT/json/$name IMPORT=github.com/hashicorp/consul/$pkg \
			TIMEOUT=$TIMEOUT GO=$GO xargs -P "$JOBS" -I{} sh -c \
			'cd "$DIR" && "$BIN" -test.v=test2json -test.run "^$1\$" -test.timeout "$TIMEOUT" 2>&1 |
				$GO tool test2json -t -p "$IMPORT" > "$JSON-$1.json"' sh {}
done
