// Package statemachine is the deterministic lock table. Every decision
// comes from the committed entry alone: the command carries the proposing
// node's clock, the table keeps clock = max(clock, command clock), and
// Apply never reads the wall clock, draws random numbers or ranges over a
// map to build state or results.
//
// It owns the Raft command format, the grouped-entry frames and the rule
// for what may share one (group.go), the result encoding, the lock record
// encoding and key layout persisted in storage, the snapshot encoding, and
// the import of a table from plain values. It reads and writes a key/value
// store only through the small interfaces in store.go (StoreReader, Store,
// ChangeWriter), and imports no Raft, storage engine, gRPC, logger or
// clock (imports_test.go): package replica runs it on dragonboat and
// badger, and the gateway translates Nacos requests into Commands, so a
// wire change cannot change how old log entries are read. The admin API's
// view of the table (adminview.go) is in the plain values of the lockview
// subpackage, so the admin API need not import this package.
package statemachine
