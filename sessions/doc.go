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
//   - [Tape.AppendAsync] is for the audit trail (loop events, timings). It
//     only assigns the id and queues the encoded line; a single background
//     goroutine per [Store] gathers the queued lines of every tape and
//     writes each tape's batch with one write(2) every
//     [Options.CommitInterval] (group commit), fsyncing it only when
//     [Options.SyncCommits] is set. A process crash can therefore lose at
//     most the entries of the last commit interval.
//
// [Tape.Flush] and [Store.Close] write everything queued and fsync. Ids stay
// monotonic across both paths, and the file keeps id order, because ids are
// assigned under the tape's lock and a synchronous append writes the queued
// lines ahead of its own.
//
// After a crash the last line may be torn. Opening such a tape skips the
// torn line with a warning (it is never an error) and the next append
// starts on a fresh line; ids continue after the last good entry.
//
// One process owns a $BUB_HOME at a time: the store keeps each tape in
// memory and does not coordinate with other writers of the same files.
package sessions
