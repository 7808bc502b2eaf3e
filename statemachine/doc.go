// Package statemachine is the replicated lock table. Every decision comes
// from the committed entry alone: the command carries the proposing node's
// clock, the table keeps clock = max(clock, command clock), and Update never
// reads the wall clock, draws random numbers or ranges over a map to build
// state or results.
//
// It owns the Raft command format, the lock record encoding persisted in
// storage, the snapshot encoding, the dragonboat on-disk state machine
// adapter and the node that proposes to it. It never imports grpc, protocol
// or gateway: the gateway translates Nacos requests into Commands, so a wire
// change cannot change how old log entries are read. The admin API's reads
// and force release (admin.go) answer in the plain values of the lockview
// subpackage, so the admin API need not import this package.
package statemachine
