// Package storage is the badger-backed key/value store under the lock
// table, plus the snapshot files: the nacos_lock.zip archive, its
// CRC-64/ECMA-182 checksum, and where it is recorded (JRaft's
// __raft_snapshot_meta beside the archive, as Nacos writes it, or a record
// after the archive in a Raft snapshot stream). It deals in keys, bytes and
// files, never in locks: the record encodings belong to statemachine.
package storage
