#!/usr/bin/env bash
# Builds the two OpenTelemetry backends the telemetry end-to-end test
# (internal/e2e TestTelemetryReachesRealBackends) runs on loopback, from
# the Go module proxy, pinned, into a cache outside the repository:
#   jaeger   github.com/jaegertracing/jaeger/cmd/jaeger at $JAEGER_VERSION
#   otelcol  an OpenTelemetry Collector with the OTLP receiver, the OTLP
#            exporter and the file exporter, from the builder manifest
#            internal/e2e/testdata/otel/builder.yaml
# A binary already in the cache is kept: a cold build takes minutes, a warm
# run a few milliseconds. The last line of output is the directory to put in
# SHAREDOS_OTEL_BIN for the test to find them.
set -euo pipefail
cd "$(dirname "$0")/.."

jaeger_version=v1.76.0
builder_version=v0.161.0
cache=${SHAREDOS_CI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sharedos-ci}/otel
manifest=internal/e2e/testdata/otel/builder.yaml
manifest_sum=$(sha256sum "$manifest" | cut -c1-12)
bin=$cache/bin
mkdir -p "$bin"

jaeger=$bin/jaeger-$jaeger_version
if [ ! -x "$jaeger" ]; then
	echo "scripts/otel-backends.sh: building jaeger $jaeger_version into $bin (minutes, once)" >&2
	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
	(
		cd "$work"
		go mod init sharedos-ci/jaeger >/dev/null 2>&1
		go get -tool "github.com/jaegertracing/jaeger/cmd/jaeger@$jaeger_version"
		CGO_ENABLED=0 go build -trimpath -o "$jaeger.tmp" github.com/jaegertracing/jaeger/cmd/jaeger
	)
	mv "$jaeger.tmp" "$jaeger"
	rm -rf "$work"
	trap - EXIT
fi
ln -sfn "$(basename "$jaeger")" "$bin/jaeger"

otelcol=$bin/otelcol-$builder_version-$manifest_sum
if [ ! -x "$otelcol" ]; then
	echo "scripts/otel-backends.sh: building the collector of $manifest into $bin (minutes, once)" >&2
	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
	sed "s|@OUTPUT@|$work/otelcol|" "$manifest" >"$work/builder.yaml"
	GOBIN=$work CGO_ENABLED=0 go install "go.opentelemetry.io/collector/cmd/builder@$builder_version"
	CGO_ENABLED=0 "$work/builder" --config "$work/builder.yaml" >"$work/builder.log" 2>&1 || {
		tail -40 "$work/builder.log" >&2
		exit 1
	}
	mv "$work/otelcol/otelcol-sharedos" "$otelcol"
	rm -rf "$work"
	trap - EXIT
fi
ln -sfn "$(basename "$otelcol")" "$bin/otelcol"

echo "$bin"
