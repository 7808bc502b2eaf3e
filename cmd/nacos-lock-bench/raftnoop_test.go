package main

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	sm "github.com/lni/dragonboat/v4/statemachine"

	"nacos-lockd/bench/load"
	"nacos-lockd/bench/peers"
)

func fifoCmd(op byte, id int) []byte {
	cmd := make([]byte, 64)
	cmd[0] = op
	binary.BigEndian.PutUint64(cmd[1:9], uint64(id))
	return cmd
}

// The W2 floor's lock: a free lock is granted with the entry's index as
// its token, a held one queues, and a release hands the lock to the
// first waiter (its caller gets the releasing entry's index); a release
// by anyone but the holder and a no-op change nothing.
func TestFIFOStateMachine(t *testing.T) {
	f := &fifoSM{grants: map[int]chan uint64{}}
	update := func(index uint64, cmd []byte) uint64 {
		t.Helper()
		r, err := f.Update(sm.Entry{Index: index, Cmd: cmd})
		if err != nil {
			t.Fatal(err)
		}
		return r.Value
	}
	if v := update(5, fifoCmd(opFIFOAcquire, 1)); v != 5 {
		t.Fatalf("acquire of a free lock = %d, want the entry's index 5", v)
	}
	if v := update(6, fifoCmd(opFIFOAcquire, 2)); v != 0 {
		t.Fatalf("acquire of a held lock = %d, want 0 (queued)", v)
	}
	granted := func(id int) uint64 {
		t.Helper()
		select {
		case tok := <-f.waiter(id):
			return tok
		case <-time.After(5 * time.Second):
			t.Fatalf("caller %d never granted", id)
			return 0
		}
	}
	update(7, fifoCmd(opFIFOAcquire, 3))
	update(8, fifoCmd(opFIFORelease, 3)) // not the holder
	update(9, fifoCmd(opNoop, 1))
	select {
	case tok := <-f.waiter(2):
		t.Fatalf("caller 2 granted %d before the holder released", tok)
	default:
	}
	update(10, fifoCmd(opFIFORelease, 1))
	if tok := granted(2); tok != 10 {
		t.Fatalf("caller 2's grant = %d, want the release's index 10", tok)
	}
	update(11, fifoCmd(opFIFORelease, 2))
	if tok := granted(3); tok != 11 {
		t.Fatalf("caller 3's grant = %d, want 11", tok)
	}
	update(12, fifoCmd(opFIFORelease, 3))
	if v := update(13, fifoCmd(opFIFOAcquire, 4)); v != 13 {
		t.Fatalf("acquire after the queue emptied = %d, want 13", v)
	}
}

// raft-noop runs W2 on a real dragonboat node: every client gets the lock
// in turn, in FIFO order, without errors.
func TestRaftNoopRunsW2(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a dragonboat node")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	port, err := peers.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	r, err := startRaftNoop(ctx, t.TempDir(), port)
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	ls, err := load.DialAll(ctx, 4, r.dialer())
	if err != nil {
		t.Fatal(err)
	}
	rep := load.W2(ctx, load.Spec{Target: "raft-noop", Workload: "w2", Clients: 4, Duration: time.Second}, ls, 0)
	if rep.Errors != 0 || rep.Ops == 0 {
		t.Fatalf("W2 on raft-noop: %d grants, %d errors", rep.Ops, rep.Errors)
	}
	if rep.FIFOChecked == 0 || rep.FIFOViolations != 0 {
		t.Fatalf("FIFO: %d violations of %d grants checked", rep.FIFOViolations, rep.FIFOChecked)
	}
}
