// Package sessions keeps a Bub session's persisted state under $BUB_HOME:
// its tape (an append-only JSON-lines log of everything that happened),
// the settings replayed from that tape (code mode, model, reasoning
// effort), and the spill sidecar that holds tool results too large to show
// the model.
//
// # Layout
//
// A session is identified by (workspace, session id). Its tape lives at
//
//	$BUB_HOME/tapes/<md5(workspace)[:16]>__<md5(session id)[:16]>.jsonl
//
// and its spill sidecar next to it as <name>__sidecar__spill.jsonl, so a
// tape written by the Python Bub framework can be read here and the other
// way round. Each line is one entry:
//
//	{"id":1,"kind":"anchor","payload":{"name":"session/start","state":{"owner":"human"}},"meta":{},"date":"2026-01-02T03:04:05.123456789Z"}
//
// Sessions whose id starts with "temp/" (throw-away subagents) are kept in
// memory only: no file is ever written for them.
//
// # History-independent opening
//
// A tape keeps none of its entries in memory, only a summary of its file
// (where its complete lines end, the highest id, counts, the last anchor,
// the settings and the latest token usage), and a snapshot of that
// summary beside it as <tape>.jsonl.idx. Opening a session reads the
// snapshot, checks it still describes the file (its last line and last
// anchor are where it says), and reads only what was appended after it;
// without a valid snapshot one streaming pass rebuilds it. Readers stream
// from the file: SinceLastAnchor from the last anchor onward, Search and
// Anchors backwards from the end until they have what they need.
//
// # Several processes
//
// Several processes may share a $BUB_HOME (a server, `bub-mcp call`, the
// agent). Every write takes an exclusive flock(2) on the tape, first reads
// what others appended since (so ids continue after theirs: never a
// duplicate), then writes. Every read, and every Settings call, checks the
// file with one stat and folds in what others appended, so another
// process's settings switch shows on the next tools/list. A reset by
// another process (the file renamed or removed) is noticed the same way
// and the new file read from its start. The file format stays Bub's JSONL.
//
// # Durability
//
// There are two ways to append, chosen by how much an entry is worth:
//
//   - [Tape.Append] hands the entry to the kernel with a single write(2)
//     before it returns, so a crash of this process never loses it. It also
//     calls fsync when the entry changes what later turns see — anchors,
//     handoffs and the *_switch settings events — so those survive a power
//     loss or kernel crash too, together with everything written before
//     them. Other entries written this way sit in the page cache until the
//     kernel writes them back: an OS crash can lose the ones written since
//     the last fsync.
//   - [Tape.AppendAsync] is for bookkeeping (loop events, spill records).
//     It only queues the entry; a single background goroutine per [Store]
//     writes each tape's queue with one write(2) every
//     [Options.CommitInterval] (group commit), fsyncing it only when
//     [Options.SyncCommits] is set. A process crash can therefore lose at
//     most the entries of the last commit interval. Ids are given when the
//     queue is written, under the lock; a synchronous append or any read
//     writes the queue first, so the file keeps id order.
//
// [Tape.Flush] and [Store.Close] write everything queued and fsync.
//
// # Backends
//
// The above describes the file backend, the default. A [Tape] does what
// every backend shares (ids, the [Summary], the AppendAsync queue,
// settings replay, spills) and leaves storing lines to a [TapeBackend]
// that its [Backend] gives it: [Options.Store] picks the backend by kind,
// "file" or one a store package registered with [Register] from init, as
// database/sql drivers do. sessions/pgstore registers "postgres", which
// keeps tapes in a database replicas share; importing sessions alone
// links no database driver. Tapes of temp/ sessions live in memory
// whatever the backend.
//
// After a crash the last line may be torn. Opening such a tape warns about
// it (it is never an error); the next append ends it with a newline, so it
// is skipped as a line of its own, and ids continue after the last good
// entry.
package sessions
