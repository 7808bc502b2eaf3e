package prof

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lni/dragonboat/v4"
	"github.com/lni/dragonboat/v4/config"
	dblogger "github.com/lni/dragonboat/v4/logger"
	sm "github.com/lni/dragonboat/v4/statemachine"
	"github.com/rs/zerolog"

	"nacos-lockd/replica"
	"nacos-lockd/statemachine"
	"nacos-lockd/storage"
)

func freeAddr(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func quiet() {
	for _, p := range []string{"raft", "rsm", "transport", "dragonboat", "raftpb", "logdb", "config", "settings", "grpc"} {
		dblogger.GetLogger(p).SetLevel(dblogger.ERROR)
	}
}

// startNode starts the real replicated table the way cmd/nacos-lockd
// does (single node, 1 ms RTT, election 10 ticks).
func startNode(tb testing.TB) *replica.Node {
	tb.Helper()
	dir := tb.TempDir()
	db, err := storage.Open(storage.Config{Dir: dir + "/locks", Logger: zerolog.Nop()})
	if err != nil {
		tb.Fatal(err)
	}
	n, err := replica.Start(replica.RaftConfig{
		NodeHostDir: dir + "/raft", RaftAddress: freeAddr(tb), ReplicaID: 1,
		RTTMillisecond: 1, ElectionRTT: 10, HeartbeatRTT: 1, CoalesceWindow: coalesceWindow(tb),
	}, db, func([]statemachine.Notification) {}, zerolog.Nop())
	if err != nil {
		tb.Fatal(err)
	}
	quiet()
	tb.Cleanup(func() { n.Close(); db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.WaitReady(ctx); err != nil {
		tb.Fatal(err)
	}
	return n
}

// coalesceWindow is PROF_COALESCE_WINDOW (a duration; 0 = off, as the
// server flag), for comparing renew figures with and without coalescing.
func coalesceWindow(tb testing.TB) time.Duration {
	v := os.Getenv("PROF_COALESCE_WINDOW")
	if v == "" {
		return 0 // the default window
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		tb.Fatalf("PROF_COALESCE_WINDOW: %v", err)
	}
	if d == 0 {
		return -1
	}
	return d
}

type proposer func(ctx context.Context, cmd statemachine.Command) error

// pairs runs acquire+release pairs from c goroutines, each on its own key,
// and reports pairs/s and process CPU per pair.
func pairs(b *testing.B, c int, propose proposer) {
	var next atomic.Int64
	b.SetParallelism(max(1, c/2)) // GOMAXPROCS is 2 here: c goroutines
	cpu0 := processCPU()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		id := next.Add(1)
		key := "bench-" + strconv.FormatInt(id, 10)
		conn := "1700000000000_127.0.0.1_" + strconv.FormatInt(40000+id, 10) + "_1"
		for pb.Next() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			now := time.Now().UnixMilli()
			if err := propose(ctx, statemachine.Command{Op: statemachine.OpAcquire, NowMs: now, Kind: statemachine.KindNonReentrant,
				Key: key, Owner: conn, ConnID: conn, LeaseMs: 30000}); err != nil {
				b.Error(err)
			}
			if err := propose(ctx, statemachine.Command{Op: statemachine.OpRelease, NowMs: now, Kind: statemachine.KindNonReentrant,
				Key: key, Owner: conn, ConnID: conn}); err != nil {
				b.Error(err)
			}
			cancel()
		}
	})
	el := b.Elapsed().Seconds()
	b.ReportMetric(float64(b.N)/el, "pairs/s")
	b.ReportMetric((processCPU()-cpu0)*1e6/float64(b.N), "cpu-us/pair")
}

var clients = []int{1, 16, 64}

// BenchmarkNode is the replicated table with no gateway: Propose through
// dragonboat, apply, badger write-through.
func BenchmarkNode(b *testing.B) {
	n := startNode(b)
	for _, c := range clients {
		b.Run(fmt.Sprintf("c=%d", c), func(b *testing.B) {
			pairs(b, c, func(ctx context.Context, cmd statemachine.Command) error {
				res, err := n.Propose(ctx, cmd)
				if err == nil && !res.Success() {
					return fmt.Errorf("%s refused: %v", cmd.Op, res.Code)
				}
				return err
			})
		})
	}
}

type noopSM struct{}

func (noopSM) Update(sm.Entry) (sm.Result, error) { return sm.Result{Value: 1}, nil }
func (noopSM) Lookup(any) (any, error)            { return nil, nil }
func (noopSM) SaveSnapshot(io.Writer, sm.ISnapshotFileCollection, <-chan struct{}) error {
	return nil
}
func (noopSM) RecoverFromSnapshot(io.Reader, []sm.SnapshotFile, <-chan struct{}) error { return nil }
func (noopSM) Close() error                                                            { return nil }

// BenchmarkRaftNoop is the ceiling: the same NodeHost settings with a
// no-op state machine.
func BenchmarkRaftNoop(b *testing.B) {
	dir := b.TempDir()
	addr := freeAddr(b)
	nh, err := dragonboat.NewNodeHost(config.NodeHostConfig{NodeHostDir: dir, WALDir: dir, RTTMillisecond: 1, RaftAddress: addr,
		Expert: config.ExpertConfig{LogDB: config.GetSmallMemLogDBConfig()}})
	if err != nil {
		b.Fatal(err)
	}
	quiet()
	defer nh.Close()
	if err := nh.StartReplica(map[uint64]dragonboat.Target{1: addr}, false, func(uint64, uint64) sm.IStateMachine { return noopSM{} },
		config.Config{ReplicaID: 1, ShardID: 1, CheckQuorum: true, PreVote: true, ElectionRTT: 10, HeartbeatRTT: 1, SnapshotEntries: 10000, CompactionOverhead: 5000}); err != nil {
		b.Fatal(err)
	}
	for {
		if _, _, ok, _ := nh.GetLeaderID(1); ok {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, c := range clients {
		b.Run(fmt.Sprintf("c=%d", c), func(b *testing.B) {
			pairs(b, c, func(ctx context.Context, cmd statemachine.Command) error {
				_, err := nh.SyncPropose(ctx, nh.GetNoOPSession(1), cmd.Encode())
				return err
			})
		})
	}
}
