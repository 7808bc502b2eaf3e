package server

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"
)

// checkPorts binds and releases the node's ports before anything starts,
// so a clash (a Nacos server already on 8848/9848/7848, a second
// nacos-lockd on the same ports) ends the start with one line that names
// the port and what moves it, instead of a Raft transport error from deep
// inside dragonboat after storage has been opened. The real listeners are
// opened later; portError words their failures the same way. The Raft
// port is checked only for a node that runs Raft.
func checkPorts(cfg Config, raft bool) error {
	type port struct {
		which string
		addr  string
	}
	ports := []port{
		{"main", net.JoinHostPort("", strconv.Itoa(cfg.Self.Port))},
		{"sdk", net.JoinHostPort("", strconv.Itoa(cfg.Self.GRPCPort()))},
	}
	if raft {
		ports = append(ports, port{"raft", cfg.Self.RaftAddress()})
	}
	for _, p := range ports {
		l, err := net.Listen("tcp", p.addr)
		if err != nil {
			return portError(cfg, p.which, p.addr, err)
		}
		if err := l.Close(); err != nil {
			return fmt.Errorf("release the %s port %s after checking it: %w", p.which, p.addr, err)
		}
	}
	return nil
}

// portError explains a failed listen on one of the node's ports: which
// port it is, how it derives from the main port, and the flag, environment
// variable or property that changes it.
func portError(cfg Config, which, addr string, err error) error {
	main := cfg.Self.Port
	move := "start on another main port with --port N (NACOS_LOCKD_PORT, server.port in --config; `make run PORT=N`); the SDK port is N+1000 and the Raft port N-1000"
	var what string
	switch which {
	case "main":
		what = fmt.Sprintf("main port %d (HTTP admin API)", main)
	case "sdk":
		what = fmt.Sprintf("SDK gRPC port %d (main port %d + 1000)", cfg.Self.GRPCPort(), main)
	default:
		what = fmt.Sprintf("Raft port %d (main port %d - 1000)", cfg.Self.RaftPort, main)
		if cfg.Cluster {
			what = fmt.Sprintf("Raft port %d", cfg.Self.RaftPort)
			move += ", or give this member ?raft_port=M in cluster.conf"
		}
	}
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%s is already in use on %s (another Nacos or nacos-lockd?): %s: %w", what, addr, move, err)
	}
	return fmt.Errorf("cannot listen on the %s at %s: %s: %w", what, addr, move, err)
}
