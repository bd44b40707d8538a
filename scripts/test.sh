#!/usr/bin/env bash
# scripts/test.sh FLAGS...: go test FLAGS over the module, for make test and
# make test-short. It says what it is doing before anything is built,
# passes go test's output through as it comes (a package's line when its
# tests finish, in go list's order), says every 30 seconds of silence how
# far it is and which package it waits for, and ends
# with one line: that every package passed, or which failed.
set -uo pipefail
cd "$(dirname "$0")/.."

mapfile -t pkgs < <(go list ./...)
total=${#pkgs[@]}
echo "go test $* ./... : $total packages. Each package's line appears when its tests finish;"
echo "on a cold cache the test binaries build first, which takes a few minutes on two cores."

status=$(mktemp)
trap 'rm -f "$status"' EXIT
done=0 start=$SECONDS partial=''
failed=()
while :; do
	if IFS= read -r -t 30 line; then
		line=$partial$line partial=''
		printf '%s\n' "$line"
		case $line in
		'ok  '$'\t'* | '?   '$'\t'*) done=$((done + 1)) ;;
		FAIL$'\t'*)
			done=$((done + 1))
			rest=${line#FAIL$'\t'}
			failed+=("${rest%%[[:space:]]*}")
			;;
		esac
	elif (($? > 128)); then
		partial+=$line
		echo "… $done of $total packages done after $((SECONDS - start))s; waiting for ${pkgs[done]#github.com/sharedos/sharedos-mcp/} (the rest build and run meanwhile)"
	else
		[ -n "$partial$line" ] && printf '%s\n' "$partial$line"
		break
	fi
done < <(go test "$@" ./... 2>&1; echo $? >"$status")

code=$(cat "$status")
if command -v claude >/dev/null 2>&1; then :; else
	echo "note: claude is not on PATH, so the real Claude Code tests were skipped" \
		"(internal/e2e TestClaudeCodeConnectsThroughTheInstalledEntry, conformance);" \
		".ci/run installs it: npm install -g @anthropic-ai/claude-code@$(sed -n 's/^claude_code=//p' .ci/run)"
fi
if [ -z "${SHAREDOS_OTEL_BIN:-}" ]; then
	echo "note: SHAREDOS_OTEL_BIN is not set, so the telemetry end-to-end test was skipped" \
		"(internal/e2e TestTelemetryReachesRealBackends); 'make otel-backends' builds Jaeger and an" \
		"OpenTelemetry Collector once (minutes) and prints the directory to export as SHAREDOS_OTEL_BIN; .ci/run does both"
fi
if ((${#failed[@]} > 0)); then
	echo "FAILED: ${#failed[@]} of $total packages: ${failed[*]}"
	exit 1
elif [ "$code" != 0 ]; then
	echo "FAILED: go test exited $code before every package reported (a build error or a crash above)"
	exit "$code"
fi
echo "all $total packages passed"
