// Package replica is this process's replica of the lock table: the
// replication layer between the deterministic table (statemachine) and
// everything that uses it.
//
// It holds the dragonboat adapter (disk.go: the on-disk state machine that
// applies entries to the table and persists it in badger through package
// storage, and streams snapshots), Node (node.go: starting the replica,
// membership, leadership, proposing, reads), group commit (coalesce.go: the
// one ordered queue that groups commands into entries), Node's admin API
// reads (admin.go), sealing an installed table into a snapshot (seal.go),
// the node's metrics and the routing of dragonboat's log (dblog.go), and
// the sizing of dragonboat's in-memory log slices for group commit
// (entryslice.go).
// A single node may run without dragonboat: the sole-voter engine
// (solo.go) orders, logs and applies the group commit's entries on one
// goroutine, over the same log package, state machine and numbering, and
// Node answers membership and leadership for it (ChooseEngine: a data dir
// keeps the engine it was made with).
// The Raft log is package raftlog (one direct synced write per Raft
// update) for a data dir made since December 2026, and dragonboat's pebble
// log for one made before (logchoice.go: a data dir keeps the log it was
// made with). Package walfile keeps either log's files padded ahead of
// their writer so each entry's sync flushes data only.
//
// Node implements gateway.Table, control.Table, admin.Locks and
// admin.Cluster; replicatest.Local is the in-memory stand-in for it.
package replica
