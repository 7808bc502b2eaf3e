// Package peers starts the lock services nacos-lock-bench compares
// against, on loopback, each in a directory of its own: etcd (built from
// the Go module proxy by bench/etcd), Redis and ZooKeeper from Debian's
// packages (installed on demand), and nacos-lockd itself. A peer that
// cannot be installed or started is reported as an error the caller turns
// into a "skipped" line.
package peers
