package compat

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"sync"

	hessian "github.com/apache/dubbo-go-hessian2"

	"nacos-lockd/statemachine"
	"nacos-lockd/storage"
)

// Nacos's lock classes as dubbo-go-hessian2 POJOs. Hessian matches fields
// by name and skips the ones a struct lacks, so one struct per class reads
// both generations: Gen 1 MutexAtomicLock has expiredTimestamp (a boxed
// Long, null before the first acquire), key and state (an AtomicInteger);
// Gen 2 classes have key, owner, connectionId, reentrantCount,
// expiredTimestamp and waitQueue. Null strings decode as "".
type nacosLockKey struct {
	LockType string `hessian:"lockType"`
	Key      string `hessian:"key"`
}

func (nacosLockKey) JavaClassName() string { return classLockKey }

type nacosWaitEntry struct {
	Owner        string `hessian:"owner"`
	ConnectionID string `hessian:"connectionId"`
	EnqueueTime  int64  `hessian:"enqueueTime"`
	WaitDeadline int64  `hessian:"waitDeadline"`
}

func (nacosWaitEntry) JavaClassName() string { return classWaitEntry }

type nacosAtomicInteger struct {
	Value int32 `hessian:"value"`
}

func (nacosAtomicInteger) JavaClassName() string { return classAtomicInt }

type nacosLockFields struct {
	Key              string        `hessian:"key"`
	Owner            string        `hessian:"owner"`
	ConnectionID     string        `hessian:"connectionId"`
	ReentrantCount   int32         `hessian:"reentrantCount"`
	ExpiredTimestamp interface{}   `hessian:"expiredTimestamp"` // long (Gen 2) or Long/null (Gen 1)
	WaitQueue        []interface{} `hessian:"waitQueue"`
	State            interface{}   `hessian:"state"` // Gen 1 only
}

type nacosMutexLock struct{ nacosLockFields }

func (nacosMutexLock) JavaClassName() string { return classMutex }

type nacosReentrantLock struct{ nacosLockFields }

func (nacosReentrantLock) JavaClassName() string { return classReentrant }

type nacosNonReentrantLock struct{ nacosLockFields }

func (nacosNonReentrantLock) JavaClassName() string { return classNonReentrant }

var registerOnce sync.Once

func registerNacosClasses() {
	registerOnce.Do(func() {
		hessian.RegisterPOJOs(&nacosLockKey{}, &nacosWaitEntry{}, &nacosAtomicInteger{},
			&nacosMutexLock{}, &nacosReentrantLock{}, &nacosNonReentrantLock{})
	})
}

// LegacyOwner is the owner Nacos gives a Gen 1 lock it migrates as held
// (MutexAtomicLock.LEGACY_OWNER).
const LegacyOwner = "legacy-migrated"

// Archive limits for Nacos snapshots: the Hessian payload is decompressed
// into memory and decoded there, so it is capped well below what the
// process can hold.
const (
	MaxNacosArchiveBytes = 256 << 20
	MaxNacosContentBytes = 512 << 20
)

// NacosImportOptions are the inputs of an import besides the snapshot.
type NacosImportOptions struct {
	// NowMs is the import time (Unix ms): leases and waits that ended by
	// then are dropped, and it becomes the table's clock. Required.
	NowMs int64
	// WaiterLeaseMs is the lease a waiter gets if the lock is handed to it
	// (Nacos queues carry none). Default DefaultLockDefaultExpireMs.
	WaiterLeaseMs int64
}

// NacosReport says what an import read and what it made of it.
type NacosReport struct {
	Check      storage.ArchiveCheck
	Generation string         // "Gen 1", "Gen 2", or "empty"
	MapType    string         // "HashMap" (untyped map) or the typed map's Java type
	Entries    int            // entries in the Nacos map
	ByClass    map[string]int // entries by lock class (simple name)
	ByType     map[string]int // entries by lock type

	LegacyMigrated int // Gen 1 locks held with a future expiry: owner legacy-migrated
	WaitersRead    int // waiters in the snapshot
	ExpiredDropped int // held, lease over by the import time: dropped (or handed to a waiter)
	FreeDropped    int // free with nobody waiting: dropped

	Table statemachine.ImportSummary
}

// DecodeNacosSnapshot decodes the content of a Nacos nacos_lock.zip entry
// (Hessian 2, docs/lock-semantics.md §9.3-§9.6) into locks for
// statemachine.NewImportedTable, with Nacos's rules applied:
//
//   - Gen 1 MutexAtomicLock: state 1 with an expiry after NowMs becomes
//     held by "legacy-migrated", count 1, expiry kept, no connection and
//     no queue; anything else (state 0, no state, expired, never acquired)
//     is free and dropped.
//   - Gen 2 locks are taken as they are: a null queue is empty, waiters
//     keep their order, and Nacos's "no expiry" (0) becomes the end of time;
//     statemachine.NewImportedTable then drops what has ended by NowMs.
//
// Refused, with a message saying why: anything but a map of LockKey to the
// three lock classes; any other class (named); references (cycles);
// unknown lock types; a lock stored under the wrong class or key.
func DecodeNacosSnapshot(content []byte, opts NacosImportOptions) (locks []statemachine.ImportedLock, rep NacosReport, err error) {
	if opts.WaiterLeaseMs <= 0 {
		opts.WaiterLeaseMs = DefaultLockDefaultExpireMs
	}
	shape, err := scanHessian(content)
	if err != nil {
		return nil, rep, err
	}
	gen1 := false
	if f, ok := shape.fields[classMutex]; ok {
		has := func(name string) bool { return contains(f, name) }
		switch {
		case has("state") && has("owner"):
			return nil, rep, fmt.Errorf("%w: MutexAtomicLock has both Gen 1 (state) and Gen 2 (owner) fields", ErrBadNacosSnapshot)
		case has("state"):
			gen1 = true
		}
	}
	registerNacosClasses()
	// scanHessian has ruled out what makes the decoder panic (unhashable
	// keys, unregistered classes, cycles); this is the last line anyway.
	defer func() {
		if r := recover(); r != nil {
			locks, err = nil, fmt.Errorf("%w: Hessian decoder failed: %v", ErrBadNacosSnapshot, r)
		}
	}()
	v, err := hessian.NewStrictDecoder(content).Decode()
	if err != nil {
		return nil, rep, fmt.Errorf("%w: decode Hessian: %v", ErrBadNacosSnapshot, err)
	}
	m, ok := v.(map[interface{}]interface{})
	if !ok {
		return nil, rep, fmt.Errorf("%w: decoded a %T, not a map", ErrBadNacosSnapshot, v)
	}
	rep.ByClass, rep.ByType = map[string]int{}, map[string]int{}
	rep.Entries = len(m)
	rep.MapType = "HashMap"
	if shape.mapType != "" {
		rep.MapType = shape.mapType
	}
	switch {
	case len(m) == 0:
		rep.Generation = "empty"
	case gen1:
		rep.Generation = "Gen 1"
	default:
		rep.Generation = "Gen 2"
	}
	for k, val := range m {
		lk, ok := k.(*nacosLockKey)
		if !ok {
			return nil, rep, fmt.Errorf("%w: map key is a %T, not a LockKey", ErrBadNacosSnapshot, k)
		}
		il, counted, err := convertLock(lk, val, gen1, opts, &rep)
		if err != nil {
			return nil, rep, fmt.Errorf("%w: %w", ErrBadNacosSnapshot, err)
		}
		if counted {
			locks = append(locks, il)
		}
	}
	// Map order is random; the table sorts, but keep the output stable too.
	sort.Slice(locks, func(i, j int) bool {
		if locks[i].Kind != locks[j].Kind {
			return locks[i].Kind < locks[j].Kind
		}
		return locks[i].Key < locks[j].Key
	})
	return locks, rep, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// convertLock maps one entry; ok false means Nacos's rules drop it here.
func convertLock(lk *nacosLockKey, val interface{}, gen1 bool, opts NacosImportOptions, rep *NacosReport) (statemachine.ImportedLock, bool, error) {
	var f *nacosLockFields
	var class, wantType string
	switch l := val.(type) {
	case *nacosMutexLock:
		f, class, wantType = &l.nacosLockFields, "MutexAtomicLock", "NACOS_LOCK"
	case *nacosReentrantLock:
		f, class, wantType = &l.nacosLockFields, "ReentrantAtomicLock", "REENTRANT"
	case *nacosNonReentrantLock:
		f, class, wantType = &l.nacosLockFields, "NonReentrantAtomicLock", "NON_REENTRANT"
	default:
		return statemachine.ImportedLock{}, false, fmt.Errorf("lock %s %q is a %T, not a Nacos lock class", lk.LockType, lk.Key, val)
	}
	name := fmt.Sprintf("lock %s %q", lk.LockType, lk.Key)
	kind, ok := statemachine.ParseKind(lk.LockType)
	if !ok {
		return statemachine.ImportedLock{}, false, fmt.Errorf("%s: unknown lock type %q (want NACOS_LOCK, REENTRANT or NON_REENTRANT)", name, lk.LockType)
	}
	if lk.LockType != wantType {
		return statemachine.ImportedLock{}, false, fmt.Errorf("%s is stored as a %s, which Nacos uses for %s", name, class, wantType)
	}
	if lk.Key == "" || f.Key != lk.Key {
		return statemachine.ImportedLock{}, false, fmt.Errorf("%s: the lock object's key is %q", name, f.Key)
	}
	rep.ByClass[class]++
	rep.ByType[lk.LockType]++
	il := statemachine.ImportedLock{Kind: kind, Key: lk.Key}
	expiry, hasExpiry, err := timestamp(f.ExpiredTimestamp)
	if err != nil {
		return il, false, fmt.Errorf("%s: expiredTimestamp: %w", name, err)
	}
	if gen1 {
		state, err := gen1State(f.State)
		if err != nil {
			return il, false, fmt.Errorf("%s: state: %w", name, err)
		}
		switch {
		case state == 1 && hasExpiry && expiry > opts.NowMs:
			rep.LegacyMigrated++
			il.Owner, il.Count, il.LeaseEndMs = LegacyOwner, 1, expiry
			return il, true, nil
		case state == 1:
			rep.ExpiredDropped++
		default:
			rep.FreeDropped++
		}
		return il, false, nil
	}
	if f.Owner != "" {
		il.Owner, il.ConnID, il.Count = f.Owner, f.ConnectionID, f.ReentrantCount
		il.LeaseEndMs = expiry
		if expiry <= 0 { // Nacos: no expiry
			il.LeaseEndMs = math.MaxInt64
		}
	}
	for i, w := range f.WaitQueue {
		we, ok := w.(*nacosWaitEntry)
		if !ok {
			return il, false, fmt.Errorf("%s: wait queue entry %d is a %T, not a WaitEntry", name, i, w)
		}
		rep.WaitersRead++
		deadline := we.WaitDeadline
		if deadline <= 0 { // Nacos: no deadline
			deadline = math.MaxInt64
		}
		if we.Owner == "" {
			return il, false, fmt.Errorf("%s: wait queue entry %d has no owner", name, i)
		}
		il.Waiters = append(il.Waiters, statemachine.ImportedWaiter{
			Owner: we.Owner, ConnID: we.ConnectionID, EnqueuedMs: we.EnqueueTime,
			DeadlineMs: deadline, LeaseMs: opts.WaiterLeaseMs,
		})
	}
	return il, true, nil
}

func timestamp(v interface{}) (int64, bool, error) {
	switch t := v.(type) {
	case nil:
		return 0, false, nil
	case int64:
		return t, true, nil
	case int32:
		return int64(t), true, nil
	}
	return 0, false, fmt.Errorf("a %T, not a long", v)
}

func gen1State(v interface{}) (int32, error) {
	switch s := v.(type) {
	case nil:
		return 0, nil // absent: left free (docs/lock-semantics.md §9.6)
	case *nacosAtomicInteger:
		return s.Value, nil
	case int32: // a boxed Integer, as Gen 2's transient field would hold
		return s, nil
	}
	return 0, fmt.Errorf("a %T, not an AtomicInteger", v)
}

// ImportNacosSnapshot reads a Nacos lock snapshot (a snapshot directory,
// or its nacos_lock.zip; see storage.ReadSnapshotPath), verifies its
// checksum, decodes it and builds the lock table to install with
// statemachine.InstallFresh.
func ImportNacosSnapshot(path string, opts NacosImportOptions) (*statemachine.Table, NacosReport, error) {
	var locks []statemachine.ImportedLock
	var rep NacosReport
	check, err := storage.ReadSnapshotPath(path, MaxNacosArchiveBytes, MaxNacosContentBytes, func(r io.Reader, _ storage.ArchiveCheck) error {
		content, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		locks, rep, err = DecodeNacosSnapshot(content, opts)
		return err
	})
	if err != nil {
		return nil, rep, err
	}
	rep.Check = check
	t, sum, err := statemachine.NewImportedTable(locks, opts.NowMs)
	if err != nil {
		return nil, rep, err
	}
	rep.Table = sum
	rep.ExpiredDropped += sum.Expired
	rep.FreeDropped += sum.Free
	return t, rep, nil
}

// Write prints the report for an operator, one fact per line.
func (r NacosReport) Write(w io.Writer) error {
	var b strings.Builder
	switch {
	case r.Check.Verified():
		fmt.Fprintf(&b, "checksum: %s verified (%s)\n", r.Check.Computed, r.Check.Source)
	default:
		fmt.Fprintf(&b, "checksum: %s not recorded, not verified\n", r.Check.Computed)
	}
	fmt.Fprintf(&b, "format: Nacos lock snapshot, %s, %s of %d entries\n", r.Generation, r.MapType, r.Entries)
	fmt.Fprintf(&b, "by class: %s\n", counts(r.ByClass))
	fmt.Fprintf(&b, "by type: %s\n", counts(r.ByType))
	fmt.Fprintf(&b, "imported: %d locks (held %d, of which legacy-migrated %d; handed to their first waiter %d)\n",
		r.Table.Locks, r.Table.Held, r.LegacyMigrated, r.Table.HandedOff)
	fmt.Fprintf(&b, "dropped: %d expired, %d free\n", r.ExpiredDropped, r.FreeDropped)
	fmt.Fprintf(&b, "waiters: %d read, %d kept, %d dropped\n", r.WaitersRead, r.Table.Waiters, r.Table.WaitersDropped)
	if r.Table.Locks > 0 {
		fmt.Fprintf(&b, "fencing tokens: imported 1..%d; new grants get higher ones\n", r.Table.TokenBase)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func counts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}
