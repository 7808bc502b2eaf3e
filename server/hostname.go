package server

import (
	"fmt"
	"os"
	"strings"
)

// explainRaftStart adds what to do to two of dragonboat's bare refusals.
// "hostname changed":
// dragonboat files its Raft log under the host's name (raftDir/<hostname>/)
// and refuses to start when the name differs from the one that wrote it.
// A container gets a new host name from every `podman run` or `docker run`
// unless given one, so a container restarted on its old volume meets this
// first (a StatefulSet pod keeps its name, and so does a machine nobody
// renames).
//
// Its "not the owner of the data directory" means the Raft address
// differs from the one the log was written with: typically `make run
// PORT=N` (or another --port or --ip) on a data dir used before.
func explainRaftStart(raftDir, raftAddr string, err error) error {
	if err != nil && strings.Contains(err.Error(), "not the owner of the data directory") {
		return fmt.Errorf("the Raft log in %s was written by a node with another Raft address than this start's %s (--ip, and --port - 1000): start with the --port and --ip it had, or give this one another --data-dir: %w",
			raftDir, raftAddr, err)
	}
	if err == nil || !strings.Contains(err.Error(), "hostname changed") {
		return err
	}
	host, _ := os.Hostname()
	var before []string
	entries, _ := os.ReadDir(raftDir)
	for _, e := range entries {
		if e.IsDir() && e.Name() != host {
			before = append(before, e.Name())
		}
	}
	return fmt.Errorf("the Raft log in %s was written on a host named %s, and this host is named %q: dragonboat ties its log to the host name, so start with the same name as before (a container: podman/docker run --hostname NAME, fixed for the life of its volume): %w",
		raftDir, strings.Join(before, " or "), host, err)
}
