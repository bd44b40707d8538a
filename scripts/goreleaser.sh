#!/usr/bin/env bash
# Runs the pinned GoReleaser with the given arguments. It is built from the
# Go module proxy into GOPATH/bin when that copy is missing or another
# version: the build takes minutes, so a reused machine keeps it.
set -euo pipefail

version=${GORELEASER_VERSION:-v2.15.1}
gopath=$(go env GOPATH)
bindir=${gopath%%:*}/bin
bin=$bindir/goreleaser

if ! "$bin" --version 2>/dev/null | grep -Eq "^GitVersion: +v?${version#v}\$"; then
	echo "scripts/goreleaser.sh: installing goreleaser $version into $bindir" >&2
	GOBIN=$bindir go install "github.com/goreleaser/goreleaser/v2@$version"
fi
exec "$bin" "$@"
