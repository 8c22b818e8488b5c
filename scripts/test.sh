#!/usr/bin/env bash
# make test: every check CI runs, ending with one line `N passed, M failed`
# over all of them (each static check counts as one; unit tests and the
# end-to-end suites count their tests). Every step runs even when an
# earlier one failed; the exit status is 1 on any failure.
#
# Speed: GOFLAGS=-trimpath makes compiled packages independent of the
# clone's directory, so a fresh clone reuses the machine's build cache
# (the model SDKs under -race are most of a cold build), and the test
# binaries' own `go build` of cmd/bub-mcp shares the same cache entries.
set -uo pipefail
cd "$(dirname "$0")/.."
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-trimpath"
GO="${GO:-go}"
STATICCHECK="${STATICCHECK:-honnef.co/go/tools/cmd/staticcheck@v0.8.2}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
pass=0
fail=0
lines=()

# check NAME CMD...: one pass or one failure.
check() {
  local name="$1"; shift
  echo "== $name" >&2
  if "$@"; then
    pass=$((pass + 1)); lines+=("$(printf '%-20s passed' "$name:")")
  else
    fail=$((fail + 1)); lines+=("$(printf '%-20s FAILED' "$name:")")
  fi
}

gofmt_check() {
  local out
  out=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './e2e/node_modules/*'))
  [ -z "$out" ] || { echo "gofmt needed:"; echo "$out"; return 1; } >&2
}
check gofmt gofmt_check
check "go vet" "$GO" vet ./...
check staticcheck "$GO" run "$STATICCHECK" ./...

echo "== go test -race" >&2
"$GO" test -race -count=1 -json ./... >"$work/unit.json" 2>"$work/unit.err"
unit_status=$?
read -r up uf < <(python3 - "$work/unit.json" <<'PY'
import json, sys
passed = failed = 0
failed_pkgs, out = set(), {}
for line in open(sys.argv[1], encoding="utf-8", errors="replace"):
    try:
        e = json.loads(line)
    except ValueError:
        continue
    key = (e.get("Package"), e.get("Test"))
    if e.get("Action") == "output":
        out.setdefault(key, []).append(e.get("Output", ""))
    elif e.get("Action") in ("pass", "fail"):
        ok = e["Action"] == "pass"
        if e.get("Test"):
            if ok:
                passed += 1
            else:
                failed += 1
                failed_pkgs.add(e.get("Package"))
                sys.stderr.write("".join(out.get(key, [])))
        else:
            sys.stderr.write(("ok   " if ok else "FAIL ") + str(e.get("Package")) + "\n")
            if not ok and e.get("Package") not in failed_pkgs:
                failed += 1  # a package that failed without a failing test: build error, panic, timeout
                sys.stderr.write("".join(out.get(key, [])))
print(passed, failed)
PY
)
cat "$work/unit.err" >&2
if [ "$unit_status" -ne 0 ] && [ "${uf:-0}" -eq 0 ]; then uf=1; fi
pass=$((pass + ${up:-0})); fail=$((fail + ${uf:-1}))
lines+=("$(printf '%-20s %d passed, %d failed' "unit tests:" "${up:-0}" "${uf:-1}")")

echo "== end-to-end" >&2
bash e2e/run.sh 2>&1 | tee "$work/e2e.log" >&2
e2e=$(grep -E '^e2e: [0-9]+ passed, [0-9]+ failed$' "$work/e2e.log" | tail -1)
if [ -z "$e2e" ]; then
  ep=0; ef=1
else
  ep=$(echo "$e2e" | awk '{print $2}'); ef=$(echo "$e2e" | awk '{print $4}')
fi
pass=$((pass + ep)); fail=$((fail + ef))
lines+=("$(printf '%-20s %d passed, %d failed' "end-to-end:" "$ep" "$ef")")

echo "== console in a browser" >&2
bash e2e/console/run.sh 2>&1 | tee "$work/console.log" >&2
console_status=${PIPESTATUS[0]}
cp=$(grep -E '^(ℹ|#) pass [0-9]+$' "$work/console.log" | tail -1 | awk '{print $3}')
cf=$(grep -E '^(ℹ|#) fail [0-9]+$' "$work/console.log" | tail -1 | awk '{print $3}')
if [ -z "$cp" ] || [ -z "$cf" ]; then
  # Skipped (a dependency missing outside CI) prints no counts; anything
  # else without counts is a failure.
  if grep -q '^e2e/console: SKIP' "$work/console.log"; then cp=0; cf=0; else cp=0; cf=1; fi
fi
if [ "$console_status" -ne 0 ] && [ "$cf" -eq 0 ]; then cf=1; fi
pass=$((pass + cp)); fail=$((fail + cf))
lines+=("$(printf '%-20s %d passed, %d failed' "console (browser):" "$cp" "$cf")")

printf '%s\n' "${lines[@]}"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
