// Package bench holds bub-mcp's end-to-end benchmarks. It compares the
// conformance binary (bub-mcp with the fixture `echo` tool, in its default
// setup: fresh $BUB_HOME, default profile, audit log on, info logs) with
// plainmcp, a plain mark3labs/mcp-go server that has the same tool. Each
// test binary builds both once with `go build`, then runs them as real
// processes. The mcp-go client runs in the benchmark process, so the
// server's CPU (read from /proc/<pid>) is measured apart from the
// client's.
//
// The package has no library code; everything is in its tests:
//
//	go test -run '^$' -bench 'Echo' -benchtime 5000x ./internal/bench/
//	go test -run '^$' -bench 'ColdStart|IdleRSS' ./internal/bench/
//	BENCH_PROTOCOL=2025-11-25 go test -run '^$' -bench Echo ./internal/bench/
//	BENCH_BUB_BIN=/tmp/candidate go test -run '^$' -bench 'Echo/.*/bub' ./internal/bench/
//
// By default the mcp-go client probes server/discover, and both servers
// then speak the sessionless 2026-07-28 protocol. BENCH_PROTOCOL pins the
// version the client negotiates instead. BENCH_BUB_BIN and BENCH_PLAIN_BIN
// replace a built binary with a given one, for example to measure a
// candidate fix against the baseline.
//
// BenchmarkEcho/<stdio|http>/<bub|plain>/c=<1|8|32> makes b.N echo calls
// from c goroutines that share one client. Each run gets a fresh server,
// warmed up with 500 calls. It reports:
//
//   - server-cpu-µs/call: the server's utime+stime delta over the measured
//     calls (/proc/<pid>/stat, 10 ms ticks) ÷ calls. Use enough calls, e.g.
//     -benchtime 5000x, for this to resolve;
//   - sched-cpu-µs/call: the same from the per-thread scheduler run time
//     (/proc/<pid>/task/*/schedstat, in ns), as a cross-check;
//   - client-cpu-µs/call: this process's CPU (getrusage) ÷ calls;
//   - calls/s: wall-clock throughput;
//   - server-RSS-MiB: the server's VmRSS after the run.
//
// ns/op, B/op and allocs/op are the client's figures.
//
// BenchmarkEchoPaired/<stdio|http>/<protocol>/c=<1|8|32> is the figure
// the speed goals are read from: both servers run at once and take turns,
// 10 rounds of b.N/10 calls each, on each transport with the 2026-07-28
// and the 2025-11-25 protocol pinned. It reports bub-cpu-µs/call and
// plain-cpu-µs/call (scheduler run time), cpu-bub/plain, each server's
// calls/s and calls/s-bub/plain. Run alone, one kind after the other,
// BenchmarkEcho's figures move with the machine between minutes:
//
//	go test -run '^$' -bench EchoPaired -benchtime 5000x ./internal/bench/
//
// BenchmarkEchoClients/http/<protocol>/clients=32 is the same with 32
// clients of one HTTP server, each making one call at a time (on the
// 2025 protocol, 32 sessions).
//
// BenchmarkColdStart/<stdio|http>/<protocol> reports bub-ms/op and
// plain-ms/op, each the mean of spawn, then the handshake, then the first
// tools/list, the two kinds started in turn, and bub/plain, their ratio;
// bub-list-ms and plain-list-ms are the means from the handshake's end
// (on 2025-11-25, the initialize answer read and notifications/initialized
// sent) to the list's answer. Its bub-mcp is cmd/bub-mcp
// (BENCH_SERVE_BIN replaces it), the others' is the fixture build. BenchmarkIdleRSS reports idle-RSS-MiB: VmRSS 200 ms after
// the first tools/list, split into anon-RSS-MiB (heap, stacks) and
// file-RSS-MiB (mapped pages of the binary and libc), plus peak-RSS-MiB
// (VmHWM). Each of their iterations is a whole process life, so a run
// takes at most 200 and 10 samples respectively, whatever b.N is.
//
// Nothing is asserted: the goals (CPU per call within 1.1× plain's on
// every wire of BenchmarkEchoPaired, HTTP calls/s at c=32 at least 0.9×
// plain's, cold start within 2× plain's) are read off the report. The
// benchmarks skip themselves with -short. TestHarnessEcho and
// TestHarnessProtocol check the harness itself: both binaries build, run
// on both transports and speak the protocol they are asked to.
package bench
