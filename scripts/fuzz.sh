#!/usr/bin/env bash
# Runs every Fuzz* target in the module for a bounded time each, one at a
# time (go test -fuzz takes one target in one package).
# Usage: scripts/fuzz.sh [fuzztime [packages…]]
# fuzztime is any -fuzztime value (default 10s); packages default to ./...
set -euo pipefail
cd "$(dirname "$0")/.."

fuzztime=${1:-10s}
shift || true
[ $# -gt 0 ] || set -- ./...

# go test -list prints a package's matching names, then "ok  <package> …".
listing=$(go test -list '^Fuzz' "$@")
targets=$(awk '/^Fuzz/ { names[n++] = $1; next }
	/^ok / { for (i = 0; i < n; i++) print $2, names[i]; n = 0 }' <<<"$listing")

count=0
while read -r pkg target; do
	[ -n "$target" ] || continue
	count=$((count + 1))
	echo "== $pkg $target ($fuzztime)"
	go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg"
done <<<"$targets"
echo "fuzzed $count targets for $fuzztime each"
