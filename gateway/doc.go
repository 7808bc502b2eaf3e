// Package gateway is the Nacos-compatible gRPC front end: it accepts the
// Java SDK's connections on the SDK port (main port + 1000), performs the
// handshake, turns LockOperationRequests into statemachine Commands, pushes
// LockNotificationRequests to queued waiters, and proposes the server-side
// commands (lease expiry on the leader, cleanup of closed connections).
//
// It imports protocol (wire types) and statemachine (Command and Result
// only, through the small lockTable interface); never storage or compat.
package gateway
