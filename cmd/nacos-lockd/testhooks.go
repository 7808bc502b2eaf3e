//go:build testhooks

package main

// TEST ONLY. Fault-injection hooks for the chaos suite (interop/chaos),
// compiled only with -tags testhooks: a release build (make build, make
// release, plain go build) compiles notesthooks.go instead, which has no
// hooks and refuses --test-hooks. Even in a testhooks build nothing here
// does anything unless the node is started with --test-hooks <file>.
//
// The control file holds key=value lines ('#' starts a comment). The node
// reads it at start and again whenever it changes (checked every 50 ms), so
// a test can change faults while the node runs:
//
//	clock-offset=1500ms   added to every clock reading of the gateway: the
//	                      NowMs stamped into commands, the reaper and the
//	                      dead-node monitor (negative values allowed). A new
//	                      value is a clock jump.
//	storage-slow=50ms     every storage batch commit sleeps this long
//	                      first. The table reaches badger when dragonboat
//	                      syncs the state machine (before a snapshot, every
//	                      4096 dirty entries, at close), and the sleep holds
//	                      up that replica's apply goroutine meanwhile
//	storage-fail=1        every storage batch commit fails: the sync, and
//	                      with it the snapshot and log compaction, fails;
//	                      the synced index does not advance
//	transfer-leader=N     whenever N changes, this node, if it leads, hands
//	                      leadership to another member
//
// An unknown key or a bad value is logged and ignored, never fatal: the
// suite must not be able to take a node down by a typo.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"nacos-lockd/server"
	"nacos-lockd/storage"
)

// testHooksBuilt says whether this binary has the test hooks.
const testHooksBuilt = true

// errTestStorageFailure is what a commit returns while storage-fail is set.
var errTestStorageFailure = errors.New("test failpoint storage-fail: injected storage failure")

// testHooks holds the current faults. A nil *testHooks is valid and means
// no hooks: every method is then a no-op returning the production value.
type testHooks struct {
	path string
	log  zerolog.Logger

	offset   atomic.Int64 // clock offset, ns
	slow     atomic.Int64 // storage commit delay, ns
	fail     atomic.Bool  // storage commits fail
	transfer atomic.Int64 // last transfer-leader value seen

	transferC chan struct{} // one pending leader transfer request
	leader    atomic.Pointer[leaderTransferer]

	stopC chan struct{}
	wg    sync.WaitGroup
}

// leaderTransferer is the one thing the hooks need from the Raft node.
type leaderTransferer interface {
	TransferLeadership(ctx context.Context) error
}

// startTestHooks reads the control file, starts watching it and installs
// the storage failpoint. It returns nil (and no error) when path is empty:
// hooks off.
func startTestHooks(path string, log zerolog.Logger) (*testHooks, error) {
	if path == "" {
		return nil, nil
	}
	h := &testHooks{
		path:      path,
		log:       log.With().Str("component", "testhooks").Logger(),
		transferC: make(chan struct{}, 1),
		stopC:     make(chan struct{}),
	}
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read --test-hooks file: %w", err)
	}
	h.apply(b, true)
	storage.SetTestFailpoint(h.storageFailpoint())
	h.log.Warn().Str("file", path).Msg("TEST HOOKS ENABLED: clock offset, storage failpoints and leader transfer may be injected; never use --test-hooks in production")
	h.wg.Add(2)
	go func() {
		defer h.wg.Done()
		h.watch(b)
	}()
	go func() {
		defer h.wg.Done()
		h.transfers()
	}()
	return h, nil
}

// stop removes the storage failpoint and ends the watcher; safe on nil.
func (h *testHooks) stop() {
	if h == nil {
		return
	}
	storage.SetTestFailpoint(nil)
	close(h.stopC)
	h.wg.Wait()
}

// clock returns the gateway's clock: nil (meaning time.Now) without hooks.
func (h *testHooks) clock() func() time.Time {
	if h == nil {
		return nil
	}
	return func() time.Time { return time.Now().Add(time.Duration(h.offset.Load())) }
}

// storageFailpoint is called before every storage batch commit: it sleeps
// for storage-slow and fails while storage-fail is set. Nil without hooks.
func (h *testHooks) storageFailpoint() func() error {
	if h == nil {
		return nil
	}
	return func() error {
		if d := time.Duration(h.slow.Load()); d > 0 {
			time.Sleep(d) // the point is to hold up the apply goroutine
		}
		if h.fail.Load() {
			return errTestStorageFailure
		}
		return nil
	}
}

// Clock and AttachNode make the hooks a server.Hooks: the server sets the
// gateway's clock from Clock before the gateway can be notified, and
// hands over the node once it has started.
func (h *testHooks) Clock() func() time.Time { return h.clock() }

func (h *testHooks) AttachNode(n server.LeaderTransferer) { h.attach(n) }

// attach gives the hooks the Raft node, for transfer-leader.
func (h *testHooks) attach(n leaderTransferer) {
	if h == nil {
		return
	}
	h.leader.Store(&n)
}

func (h *testHooks) watch(last []byte) {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-h.stopC:
			return
		case <-t.C:
		}
		b, err := os.ReadFile(h.path)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			continue
		}
		if bytes.Equal(b, last) {
			continue
		}
		last = b
		h.apply(b, false)
	}
}

// apply parses the control file. Keys that are absent go back to "no fault".
func (h *testHooks) apply(b []byte, first bool) {
	var offset, slow time.Duration
	fail := false
	transfer := h.transfer.Load()
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		var err error
		switch {
		case !ok:
			err = errors.New("want key=value")
		case k == "clock-offset":
			offset, err = time.ParseDuration(v)
		case k == "storage-slow":
			slow, err = time.ParseDuration(v)
		case k == "storage-fail":
			fail, err = strconv.ParseBool(v)
		case k == "transfer-leader":
			transfer, err = strconv.ParseInt(v, 10, 64)
		default:
			err = errors.New("unknown key")
		}
		if err != nil {
			h.log.Warn().Str("line", line).Err(err).Msg("test hooks: line ignored")
		}
	}
	if old := time.Duration(h.offset.Swap(int64(offset))); old != offset || first {
		h.log.Warn().Dur("clock_offset", offset).Dur("jump", offset-old).Msg("test hooks: clock offset set")
	}
	if old := time.Duration(h.slow.Swap(int64(slow))); old != slow {
		h.log.Warn().Dur("storage_slow", slow).Msg("test hooks: storage delay set")
	}
	if old := h.fail.Swap(fail); old != fail {
		h.log.Warn().Bool("storage_fail", fail).Msg("test hooks: storage failure set")
	}
	if old := h.transfer.Swap(transfer); old != transfer && !first {
		select {
		case h.transferC <- struct{}{}:
		default: // one is already pending
		}
	}
}

func (h *testHooks) transfers() {
	for {
		select {
		case <-h.stopC:
			return
		case <-h.transferC:
		}
		n := h.leader.Load()
		if n == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := (*n).TransferLeadership(ctx)
		cancel()
		if err != nil {
			h.log.Warn().Err(err).Msg("test hooks: leader transfer failed")
			continue
		}
		h.log.Warn().Msg("test hooks: leader transfer requested (no-op unless this node led)")
	}
}
