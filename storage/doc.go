// Package storage is the badger-backed key/value store under the lock
// table, plus the nacos_lock.zip snapshot archive. It deals in keys, bytes
// and files, never in locks: the record encodings belong to statemachine.
package storage
