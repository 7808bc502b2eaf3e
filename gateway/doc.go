// Package gateway is the Nacos-compatible gRPC front end: it accepts the
// Java SDK's connections on the SDK port (main port + 1000), performs the
// handshake, turns LockOperationRequests into statemachine Commands, pushes
// LockNotificationRequests to queued waiters, and runs the leader's control
// loops (package control: lease expiry, cleanup of closed connections and
// of dead nodes' connections) over the same table.
//
// It imports protocol (wire types), statemachine (Command, Result and the
// query answers) and control; it reaches the replicated table only through
// the Table interface it declares (replica.Node implements it), and never
// depends on replica, storage, dragonboat or badger (imports_test.go).
package gateway
