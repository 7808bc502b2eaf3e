// Package control runs the leader-side control loops over the replicated
// lock table: the expiry reaper (reaper.go: EXPIRE for every lease that
// ended), the retried cleanup of a closed connection after the disconnect
// grace, and the dead-node monitor (monitor.go: CLEANUP_CONNECTION for the
// connections of a node unreachable for the node grace, and of no node).
//
// The loops run against control.Table, which declares everything they
// need; they import no Raft, storage or gRPC (imports_test.go). The
// gateway starts them when it serves and stops them when it shuts down.
package control
