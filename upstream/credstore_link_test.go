package upstream_test

// The PostgreSQL credential store registers itself for [store] kind =
// "postgres"; it imports this package, so the internal tests that run
// replicas on PostgreSQL (TestLoginSingleUseAcrossReplicas) get it linked
// from here.
import _ "github.com/bubbuild/bub-mcp/sessions/pgstore/credstore"
