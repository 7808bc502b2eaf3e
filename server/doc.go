// Package server assembles one nacos-lockd node from its parts and owns
// its lifecycle: the data dir, joining, sealing an installed table, and
// the shutdown order. cmd/nacos-lockd parses flags, environment and
// properties into a Config and calls New, Run and Close.
//
// # Build order
//
// New builds each part from the ones before it, and returns only a whole
// server (on error it closes what it built, last built first):
//
//  1. the data dir: the replica id stored by an earlier start, or one
//     given by the cluster (--join: joinCluster asks the other members'
//     admin APIs), or the bootstrap id; then Config.Install (the
//     --import-nacos install into an empty dir) and the seal check
//     (SealPending);
//  2. storage (badger, DataDir/locks);
//  3. the Raft replica (replica.Start, DataDir/raft), after this node's
//     own DNS name resolves (Config.Names, cluster only);
//  4. the peer directory, over the node's membership;
//  5. the gateway (gateway.New), its dead-node monitor asking the peer
//     directory;
//  6. the admin API (admin.New) over the node, the gateway and the peer
//     directory, and both ports bound.
//
// Run serves the admin API at once, waits for the node to be ready,
// seals an installed table (below), and only then serves the gateway,
// whose Serve starts the leader's control loops (package control) over
// the node.
//
// # The one cycle
//
// The replica delivers grants to waiters through a notifier given to
// replica.Start, which is the gateway's Notify; but the gateway's
// dead-node monitor needs the peer directory, which needs the node. The
// node is therefore started with a small notifier of this package
// (grants) that reaches the gateway once New has built it, and drops
// notifications until then. Dropping them is exactly what the gateway
// would do with them: a notification is a push to a connection this node
// holds, and before the gateway serves it holds none (what the node
// applies then is its own log, replayed on restart, for connections of an
// earlier run). The gateway is reachable through grants before New
// returns, but nothing outside New can see the server in between, and the
// gateway takes no request before Run. The other way round (the gateway
// built first, the peer directory given the node afterwards) would leave
// a directory that answers "not alive" until patched, which is what this
// package replaced.
//
// # Seal after import
//
// A table installed by --import-nacos or `snapshot restore`
// (ImportMarker, RestoreMarker) is in storage but in no Raft log entry: a
// replica that joins later and replays the log would miss it. The first
// start on such a dir seals it into a Raft snapshot after the node is
// ready and before the gateway serves, then writes SealedMarker; a start
// on a sealed dir is an ordinary restart. A failed seal ends Run with
// "seal the imported table: ...", and the next start tries again.
//
// # Shutdown order
//
// When Run's context ends the gateway shuts down first, gracefully: it
// hands leadership over if it leads, asks every client to reconnect
// elsewhere, drains the calls in flight (gateway.Config.ShutdownGrace),
// and its control loops stop. Run returns once it has. Close then closes
// the node (Raft stops; storage is synced) and storage last. The test
// hooks (Config.Hooks, -tags testhooks) are started by the caller before
// New and stopped after Close.
package server
