package statemachine

import (
	"bytes"
	"encoding/binary"
	"slices"
	"testing"

	"nacos-lockd/storage/storagetest"
)

func TestForceRelease(t *testing.T) {
	t.Run("frees whatever the owner and count and hands the lock to the next waiter", func(t *testing.T) {
		tb := run(t, []step{
			{acq(R, "k", "a", "c1", 100, 10000, 0), ok(1, 1)},
			{acq(R, "k", "a", "c1", 110, 10000, 0), ok(2, 1)},
			{acq(R, "k", "b", "c2", 120, 3000, 60000), queued(0)},
			{acq(R, "k", "c", "c3", 130, 3000, 60000), queued(1)},
			{forceRel(R, "k", 0, 200), Result{Code: CodeOK, WaitPosition: -1, Token: 1}}, // index 5
		})
		l := tb.Lock(R, "k")
		if l.Owner != "b" || l.ConnID != "c2" || l.Count != 1 || !l.Unclaimed || l.Token != 5 || l.LeaseEndMs != 3200 || l.AcquiredAtMs != 200 ||
			len(l.Waiters) != 1 || l.Waiters[0].Owner != "c" {
			t.Fatalf("after force release: %+v", l)
		}
		if n := tb.TakeNotifications(); !slices.Equal(n, []Notification{{ConnID: "c2", Owner: "b", Kind: R, Key: "k", Token: 5}}) {
			t.Fatalf("notifications: %+v", n)
		}
		// The old holder has lost it: its release and renew are refused.
		if got := tb.Apply(6, rel(R, "k", "a", 210)); got != refused(CodeNotOwner) {
			t.Fatalf("old holder's release: %+v", got)
		}
		// The waiter claims the grant as after any release.
		if got := tb.Apply(7, Command{Op: OpAcquire, Kind: R, Key: "k", Owner: "b", ConnID: "c2", NowMs: 220, LeaseMs: 3000, WaitMs: 60000, Retry: true}); got != ok(1, 5) {
			t.Fatalf("claim: %+v", got)
		}
		checkInvariants(t, tb)
	})
	t.Run("with nobody waiting the lock is gone", func(t *testing.T) {
		tb := run(t, []step{
			{acq(N, "k", "a", "c1", 100, 10000, 0), ok(1, 1)},
			{forceRel(N, "k", 1, 200), Result{Code: CodeOK, WaitPosition: -1, Token: 1}},
			{acq(N, "k", "b", "c2", 300, 10000, 0), ok(1, 3)},
		})
		if l := tb.Lock(N, "k"); l.Owner != "b" || l.AcquiredAtMs != 300 {
			t.Fatalf("new grant: %+v", l)
		}
	})
	t.Run("a token names the grant: another one is left alone", func(t *testing.T) {
		tb := run(t, []step{
			{acq(N, "k", "a", "c1", 100, 10000, 0), ok(1, 1)},
			{rel(N, "k", "a", 110), ok(0, 0)},
			{acq(N, "k", "b", "c2", 120, 10000, 0), ok(1, 3)},
			{forceRel(N, "k", 1, 200), refused(CodeNotOwner)},
		})
		if l := tb.Lock(N, "k"); l.Owner != "b" || l.Token != 3 {
			t.Fatalf("a stale force release changed the holder: %+v", l)
		}
	})
	t.Run("of a free or missing lock is refused and creates nothing", func(t *testing.T) {
		tb := run(t, []step{
			{forceRel(N, "k", 0, 100), refused(CodeNotFound)},
			{acq(G, "k", "c1", "c1", 100, 1000, 0), ok(1, 2)},
			{forceRel(N, "k", 0, 110), refused(CodeNotFound)}, // same key, other type
		})
		if tb.Lock(N, "k").Found || tb.Stats().Locks != 1 {
			t.Fatalf("force release created an entry: %+v", tb.Stats())
		}
	})
	t.Run("of a lease already over: it expired, and the next grant is another one", func(t *testing.T) {
		tb := run(t, []step{
			{acq(N, "k", "a", "c1", 100, 1000, 0), ok(1, 1)},
			{acq(N, "k", "b", "c2", 110, 1000, 60000), queued(0)},
			{forceRel(N, "k", 1, 1101), refused(CodeNotOwner)}, // index 3 settles first: b is granted
			{acq(N, "k2", "a", "c1", 1200, 1000, 0), ok(1, 4)},
			{forceRel(N, "k2", 4, 2201), refused(CodeNotFound)}, // expired, nobody waits: gone
		})
		if l := tb.Lock(N, "k"); l.Owner != "b" || l.Token != 3 || !l.Unclaimed {
			t.Fatalf("after expiry: %+v", l)
		}
		// Without a token it is whoever holds the lock when it applies.
		tb.Apply(6, forceRel(N, "k", 0, 1300))
		if tb.Lock(N, "k").Found {
			t.Fatal("force release without a token left the lock held")
		}
	})
	t.Run("of an unclaimed grant passes it on", func(t *testing.T) {
		tb := run(t, []step{
			{acq(N, "k", "a", "c1", 100, 1000, 0), ok(1, 1)},
			{acq(N, "k", "b", "c2", 110, 1000, 60000), queued(0)},
			{acq(N, "k", "c", "c3", 120, 1000, 60000), queued(1)},
			{rel(N, "k", "a", 200), ok(0, 0)}, // index 4: b granted, unclaimed
			{forceRel(N, "k", 4, 210), Result{Code: CodeOK, WaitPosition: -1, Token: 4}},
		})
		if l := tb.Lock(N, "k"); l.Owner != "c" || l.Token != 5 || !l.Unclaimed || l.AcquiredAtMs != 210 {
			t.Fatalf("after force release of the unclaimed grant: %+v", l)
		}
	})
	t.Run("needs a kind and a key", func(t *testing.T) {
		run(t, []step{
			{forceRel(0, "k", 0, 100), refused(CodeMalformed)},
			{forceRel(N, "", 0, 100), refused(CodeMalformed)},
		})
	})
}

func TestForceReleaseEncodesAsOp7(t *testing.T) {
	c := forceRel(R, "a/b c", 42, 1000)
	b := c.Encode()
	if b[1] != 7 {
		t.Fatalf("FORCE_RELEASE encodes as op %d: the log format says 7", b[1])
	}
	if back, err := DecodeCommand(b); err != nil || back != c {
		t.Fatalf("round trip: %+v %v", back, err)
	}
	if OpForceRelease.String() != "FORCE_RELEASE" {
		t.Fatal(OpForceRelease.String())
	}
}

func TestAcquiredAtIsTheGrantTime(t *testing.T) {
	tb := run(t, []step{
		{acq(R, "k", "a", "c1", 100, 1000, 0), ok(1, 1)},
		{acq(R, "k", "a", "c1", 500, 1000, 0), ok(2, 1)}, // re-entry: same grant
		{renew(R, "k", "a", "c2", 900, 1000), ok(2, 1)},
		{acq(R, "k", "b", "c3", 950, 1000, 60000), queued(0)},
	})
	if l := tb.Lock(R, "k"); l.AcquiredAtMs != 100 {
		t.Fatalf("after re-entry and renew: %+v", l)
	}
	tb.Apply(5, rel(R, "k", "a", 1000))
	tb.Apply(6, rel(R, "k", "a", 1200)) // hands off at 1200
	if l := tb.Lock(R, "k"); l.Owner != "b" || l.AcquiredAtMs != 1200 {
		t.Fatalf("after hand-off: %+v", l)
	}
	tb.Apply(7, Command{Op: OpAcquire, Kind: R, Key: "k", Owner: "b", ConnID: "c3", NowMs: 1300, LeaseMs: 1000, WaitMs: 60000, Retry: true})
	if l := tb.Lock(R, "k"); l.Unclaimed || l.AcquiredAtMs != 1200 {
		t.Fatalf("the claim moved the grant time: %+v", l)
	}
}

// encodeRecordV1 writes the layout of record version 1, as builds before
// acquiredAt stored it.
func encodeRecordV1(l *lockState) []byte {
	b := []byte{1, 0}
	if l.unclaimed {
		b[1] = 1
	}
	b = appendString(b, l.owner)
	b = appendString(b, l.connID)
	b = binary.AppendUvarint(b, uint64(l.count))
	b = binary.AppendVarint(b, l.leaseEnd)
	b = binary.AppendUvarint(b, l.token)
	b = binary.AppendUvarint(b, uint64(len(l.queue())))
	for _, w := range l.queue() {
		b = appendString(b, w.owner)
		b = appendString(b, w.connID)
		b = binary.AppendVarint(b, w.enqueued)
		b = binary.AppendVarint(b, w.deadline)
		b = binary.AppendVarint(b, w.leaseMs)
	}
	return b
}

func TestRecordVersions(t *testing.T) {
	l := &lockState{owner: "o", connID: "c", count: 2, leaseEnd: 9000, token: 7, acquiredAt: 1234, unclaimed: true,
		waitq: &[]waiter{{"w", "cw", 10, 20, 30}}}
	got, err := decodeRecord(encodeRecord(l), nil)
	if err != nil || describe(got) != describe(l) {
		t.Fatalf("version 2 round trip: %s %v", describe(got), err)
	}
	old, err := decodeRecord(encodeRecordV1(l), nil)
	want := *l
	want.acquiredAt = 0
	if err != nil || describe(old) != describe(&want) {
		t.Fatalf("version 1: %s %v, want %s", describe(old), err, describe(&want))
	}
	for _, v := range []byte{0, 3, 255} {
		b := encodeRecord(l)
		b[0] = v
		if _, err := decodeRecord(b, nil); err == nil {
			t.Errorf("record version %d accepted", v)
		}
	}
}

func TestSnapshotRecordVersionMustMatchFormat(t *testing.T) {
	tb := replay(NewTable(), goldenCommands())
	state := tb.StateBytes() // format 3, version 2 records
	// Rewrite the header as format 2: its version 2 records are refused.
	v2 := bytes.Replace(state, []byte(snapshotMagic+"\x03"), []byte(snapshotMagic+"\x02"), 1)
	if _, err := readSnapshot(bytes.NewReader(v2)); err == nil {
		t.Fatal("a format 2 snapshot with version 2 records was accepted")
	}
}

func listAll(t *testing.T, tb *Table, q ListQuery) []string {
	t.Helper()
	var out []string
	for pages := 0; ; pages++ {
		if pages > 100 {
			t.Fatal("listing does not end")
		}
		p := tb.List(q)
		for _, l := range p.Locks {
			out = append(out, l.Type+" "+l.Key)
		}
		if !p.More {
			return out
		}
		last := p.Locks[len(p.Locks)-1]
		q.AfterKind, _ = ParseKind(last.Type)
		q.AfterKey = last.Key
	}
}

func TestListPagesInOrder(t *testing.T) {
	tb := NewTable()
	keys := []string{"orders/2024/1", "orders/2024/2", "orders/2025/1", "orders", "ordersX", "a b", "键/🔒", "..", "/lead", "z"}
	i := uint64(0)
	for _, k := range keys {
		for _, kind := range []Kind{N, R, G} {
			i++
			tb.Apply(i, acq(kind, k, "o", "c", 100, 100000, 0))
		}
	}
	tb.Apply(i+1, acq(R, "orders/2024/1", "w", "c2", 100, 1000, 60000)) // a waiter does not add a row
	checkInvariants(t, tb)
	sorted := slices.Clone(keys)
	slices.Sort(sorted) // byte order
	var all []string
	for _, kind := range []Kind{G, R, N} {
		for _, k := range sorted {
			all = append(all, kind.String()+" "+k)
		}
	}
	for _, limit := range []int{0, 1, 2, 3, 7, 30, 31} {
		if got := listAll(t, tb, ListQuery{Limit: limit}); !slices.Equal(got, all) {
			t.Fatalf("limit %d:\n got %q\nwant %q", limit, got, all)
		}
	}
	var reentrant []string
	for _, k := range sorted {
		reentrant = append(reentrant, "REENTRANT "+k)
	}
	if got := listAll(t, tb, ListQuery{Kind: R, Limit: 4}); !slices.Equal(got, reentrant) {
		t.Fatalf("one kind: %q", got)
	}
	wantPrefix := []string{"NACOS_LOCK orders/2024/1", "NACOS_LOCK orders/2024/2", "REENTRANT orders/2024/1", "REENTRANT orders/2024/2",
		"NON_REENTRANT orders/2024/1", "NON_REENTRANT orders/2024/2"}
	for _, limit := range []int{1, 2, 5, 100} {
		if got := listAll(t, tb, ListQuery{Prefix: "orders/2024/", Limit: limit}); !slices.Equal(got, wantPrefix) {
			t.Fatalf("prefix, limit %d: %q", limit, got)
		}
	}
	if got := listAll(t, tb, ListQuery{Kind: N, Prefix: "键", Limit: 1}); !slices.Equal(got, []string{"NON_REENTRANT 键/🔒"}) {
		t.Fatalf("non-ASCII prefix: %q", got)
	}
	if got := tb.List(ListQuery{Prefix: "nothing"}); len(got.Locks) != 0 || got.More {
		t.Fatalf("no match: %+v", got)
	}
	// A page exactly as long as what is left says there is no more.
	if p := tb.List(ListQuery{Kind: R, AfterKind: R, AfterKey: sorted[len(sorted)-3], Limit: 2}); len(p.Locks) != 2 || p.More {
		t.Fatalf("last page: %+v", p)
	}
	// A cursor of a lock released since still positions the next page.
	i += 2
	tb.Apply(i, rel(R, "a b", "o", 200))
	if p := tb.List(ListQuery{Kind: R, AfterKind: R, AfterKey: "a b", Limit: 1}); p.Locks[0].Key != sorted[slices.Index(sorted, "a b")+1] {
		t.Fatalf("after a released lock: %+v", p.Locks[0])
	}
	if p := tb.List(ListQuery{Limit: 1}); p.Applied != i {
		t.Fatalf("page applied index %d, want %d", p.Applied, i)
	}
	checkInvariants(t, tb)
}

// A store written before acquiredAt holds version 1 records. It loads
// (grant times unknown), and its snapshots hold version 2 records only:
// the same bytes as a table that never had an old record.
func TestOldRecordsInStoreAndSnapshots(t *testing.T) {
	src := replay(NewTable(), goldenCommands())
	db := storagetest.OpenInMemory(t)
	err := db.Replace(func(put func(k, v []byte) error) error {
		if err := src.StoredPairs(func(k, v []byte) error {
			if k[0] == lockPrefix {
				l, err := decodeRecord(v, nil)
				if err != nil {
					return err
				}
				v = encodeRecordV1(l)
			}
			return put(k, v)
		}); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := LoadStore(db)
	if err != nil {
		t.Fatal(err)
	}
	want := forgetAcquiredAt(replay(NewTable(), goldenCommands()))
	if !bytes.Equal(s.StateBytes(), want.StateBytes()) {
		t.Fatal("table loaded from version 1 records differs")
	}
	archive := storedStream(t, db)
	back, err := readStream(bytes.NewReader(archive))
	if err != nil {
		t.Fatalf("read the snapshot of old records: %v", err)
	}
	if !bytes.Equal(back.StateBytes(), want.StateBytes()) {
		t.Fatal("snapshot of version 1 records does not hold the same state")
	}
	// The next grant is stored in version 2 with its time.
	s.Apply(15, acq(N, "new", "o", "c", 6000, 1000, 0))
	b := db.NewBatch()
	s.WriteChanges(b)
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	rec, err := db.Get(lockKey(lockID{N, "new"}))
	if err != nil || rec[0] != 2 {
		t.Fatalf("new record: %v %v", rec, err)
	}
}
