#!/usr/bin/env bash
# End-to-end suites, run by `make test` (make e2e):
#   1. the official MCP conformance suite against the fixture binary
#      (internal/conformance) over streamable HTTP:
#        - @modelcontextprotocol/conformance 0.1.16, --suite all;
#        - 0.2.0-alpha.12 (npm alias conformance-next), --requirements
#          2025-11-25 (stateful wire: initialize + Mcp-Session-Id) and
#          --requirements 2026-07-28 (stateless wire: per-request _meta).
#          The suite picks the wire from the revision; bub-mcp serves both
#          eras on the same /mcp, so both runs use one server and one URL;
#      conformance counts scenarios (the scored ones for --requirements);
#   2. the official TypeScript SDK clients against the real bub-mcp:
#        - v1 (@modelcontextprotocol/sdk), stdio and HTTP (client.test.mjs);
#        - v2 (@modelcontextprotocol/client), stdio and HTTP, each at the
#          2025-11-25 and the 2026-07-28 protocol (client-v2.test.mjs);
#      node tests count tests.
# Every suite runs even when an earlier one failed. The last line is
# `e2e: N passed, M failed` over all of them; the exit code is 1 on any
# failure. Skipped node tests count as failures when CI=true; a missing
# dependency (go, python3, node/npm) always fails the run, it never skips it.
# Installs its own Node 22 and npm packages (setup.sh).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
ci="${CI:-false}"

missing=()
command -v go >/dev/null 2>&1 || missing+=("go (the Go toolchain, to build bub-mcp)")
command -v python3 >/dev/null 2>&1 || missing+=("python3 (code mode's run_code, used by the client tests)")
if [ "${#missing[@]}" -gt 0 ]; then
  for m in "${missing[@]}"; do echo "e2e: missing dependency: $m" >&2; done
  echo "e2e: 0 passed, 1 failed"
  exit 1
fi
if ! node22="$("$here/setup.sh")"; then
  echo "e2e: setup.sh failed (node/npm or the npm install); nothing ran" >&2
  echo "e2e: 0 passed, 1 failed"
  exit 1
fi

work="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

echo "e2e: building binaries" >&2
(cd "$root" && go build -o "$work/bub-mcp" ./cmd/bub-mcp && go build -o "$work/bub-mcp-conformance" ./internal/conformance/cmd/bub-mcp-conformance)

# start_http BIN LOG: serve on a free loopback port in the background and
# set $url. Not in a subshell: the PID must reach cleanup and the server
# must not hold a command substitution's pipe open.
start_http() {
  local bin="$1" log="$2"
  "$bin" serve --http 127.0.0.1:0 >/dev/null 2>"$log" &
  pids+=($!)
  url=""
  for _ in $(seq 1 100); do
    url=$(grep -o 'url=http://[^ ]*' "$log" | head -1 | cut -d= -f2 || true)
    [ -n "$url" ] && return 0
    sleep 0.1
  done
  echo "e2e: server did not start:" >&2; cat "$log" >&2; return 1
}

total_pass=0
total_fail=0
summary=()
# record NAME PASSED FAILED [DETAIL]
record() {
  total_pass=$((total_pass + $2))
  total_fail=$((total_fail + $3))
  summary+=("$(printf '%-28s %3d passed, %3d failed%s' "$1:" "$2" "$3" "${4:+  ($4)}")")
}

mkdir -p "$work/conf-home"
BUB_HOME="$work/conf-home" start_http "$work/bub-mcp-conformance" "$work/conformance-server.log"
conf_failed=0
known_gaps=""

# conformance NAME CLI ARGS...: run one conformance CLI invocation and record
# its scenarios. In --requirements mode only scored scenarios count; the
# unscored ones (extensions, pending) are listed under "Not scored for" and
# reported for information.
conformance() {
  local name="$1" cli="$2"; shift 2
  local out="$work/$name.out" status
  echo "e2e: $name: conformance server --url $url $*" >&2
  set +e
  "$node22" "$here/node_modules/$cli/dist/index.js" server --url "$url" "$@" >"$out" 2>&1
  status=$?
  set -e
  sed -n '/=== SUMMARY ===/,$p' "$out" >&2
  # Scored scenarios: summary lines not named in the "Not scored" list.
  local counts
  counts=$(awk '
    /^Not scored for / { ns = 1; next }
    ns && /^  (✓|✗) / { n = $2; unscored[n] = 1; next }
    /^=== SUMMARY ===/ { sum = 1; next }
    sum && /^(✓|✗) / { name = $2; sub(/:$/, "", name); ok[name] = ($1 == "✓"); order[++k] = name }
    END {
      p = 0; f = 0; failed = ""; skipped = 0
      for (i = 1; i <= k; i++) {
        n = order[i]
        if (n in unscored) { skipped++; continue }
        if (ok[n]) p++; else { f++; failed = failed (failed == "" ? "" : " ") n }
      }
      printf "%d %d %d %s\n", p, f, skipped, failed
    }' "$out")
  local p f u failed
  read -r p f u failed <<<"$counts"
  if [ $((p + f)) -eq 0 ]; then
    echo "e2e: $name: no scenario ran (exit $status); output:" >&2; tail -30 "$out" >&2
    f=1
  elif [ "$status" -ne 0 ] && [ "$f" -eq 0 ]; then
    echo "e2e: $name: the CLI exited $status with no failing scenario; output:" >&2; tail -30 "$out" >&2
    f=1
  fi
  local gaps="$here/known-gaps-$name.txt" known=0 unexpected="" fixed=""
  if [ -f "$gaps" ]; then
    local n
    for n in $failed; do
      if grep -qx -- "$n" "$gaps"; then known=$((known + 1)); else unexpected="$unexpected $n"; fi
    done
    while read -r n; do
      case "$n" in ''|'#'*) continue ;; esac
      case " $failed " in *" $n "*) ;; *) grep -q "^[✓] $n\b" "$out" && fixed="$fixed $n" ;; esac
    done <"$gaps"
    f=$((f - known))
    if [ -n "$fixed" ]; then
      echo "e2e: $name: now passing, remove from $(basename "$gaps"):$fixed" >&2
      f=$((f + 1))
    fi
    failed="${unexpected# }"
    known_gaps="${known_gaps:+$known_gaps; }$name: $known known gaps (see e2e/$(basename "$gaps"))"
  fi
  local detail="${failed:+failed: $failed}"
  [ "$u" -eq 0 ] || detail="${detail:+$detail; }$u unscored, not counted"
  [ "$known" -eq 0 ] || detail="${detail:+$detail; }$known known gaps, not counted"
  record "conformance $name" "$p" "$f" "$detail"
  [ "$f" -eq 0 ] || conf_failed=1
}

conformance "0.1.16 suite-all" "@modelcontextprotocol/conformance" --suite all
conformance "2025-11-25" "conformance-next" --requirements 2025-11-25 --timeout 10000
conformance "2026-07-28" "conformance-next" --requirements 2026-07-28 --timeout 10000
if [ "$conf_failed" -ne 0 ]; then
  echo "e2e: conformance failures; fixture server log (tail):" >&2; tail -30 "$work/conformance-server.log" >&2
fi

# node_suite NAME FILE: run one node --test file against bub-mcp and record
# its tests (from a TAP copy of the results).
node_suite() {
  local name="$1" file="$2" tap="$work/$1.tap" status
  echo "e2e: $name: node --test $file" >&2
  set +e
  BUB_MCP_BIN="$work/bub-mcp" "$node22" --test \
    --test-reporter=spec --test-reporter-destination=stderr \
    --test-reporter=tap --test-reporter-destination="$tap" \
    "$here/$file"
  status=$?
  set -e
  local pass fail cancelled skipped todo
  pass=$(sed -n 's/^# pass \([0-9]*\)$/\1/p' "$tap" | tail -1)
  fail=$(sed -n 's/^# fail \([0-9]*\)$/\1/p' "$tap" | tail -1)
  cancelled=$(sed -n 's/^# cancelled \([0-9]*\)$/\1/p' "$tap" | tail -1)
  skipped=$(sed -n 's/^# skipped \([0-9]*\)$/\1/p' "$tap" | tail -1)
  todo=$(sed -n 's/^# todo \([0-9]*\)$/\1/p' "$tap" | tail -1)
  pass=${pass:-0} fail=$(( ${fail:-0} + ${cancelled:-0} )) skipped=$(( ${skipped:-0} + ${todo:-0} ))
  local detail=""
  if [ "$skipped" -gt 0 ]; then
    if [ "$ci" = true ]; then fail=$((fail + skipped)); detail="$skipped skipped, counted as failed (CI)"
    else detail="$skipped skipped"; fi
  fi
  if [ "$status" -ne 0 ] && [ "$fail" -eq 0 ]; then fail=1; detail="${detail:+$detail; }node exited $status"; fi
  record "$name" "$pass" "$fail" "$detail"
}

node_suite "ts-sdk v1 client" client.test.mjs
node_suite "ts-sdk v2 client" client-v2.test.mjs

echo >&2
printf '%s\n' "${summary[@]}"
[ -z "$known_gaps" ] || echo "known gaps: $known_gaps"
echo "e2e: $total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
