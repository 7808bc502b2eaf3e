package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/lni/dragonboat/v4"
	"github.com/lni/dragonboat/v4/client"
	"github.com/lni/dragonboat/v4/config"
	dblogger "github.com/lni/dragonboat/v4/logger"
	sm "github.com/lni/dragonboat/v4/statemachine"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/stats"
	"google.golang.org/protobuf/proto"

	"nacos-lockd/bench/load"
	"nacos-lockd/bench/peers"
	lockclient "nacos-lockd/interop/client"
	"nacos-lockd/protocol"
	"nacos-lockd/protocol/pb"
	"nacos-lockd/replica"
	"nacos-lockd/settings"
	"nacos-lockd/statemachine"
	"nacos-lockd/transport/h2grpc"
)

// ---- Redis: SET key val NX PX lease, released by a compare-and-delete
// script (the single-instance recipe of the Redis docs). Redis has no
// wait queue: a waiting client retries every millisecond.

var unlockScript = redis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`)

type redisLocker struct {
	c     *redis.Client
	val   string
	lease time.Duration
}

func dialRedis(addr string, lease time.Duration) load.Dialer {
	return func(ctx context.Context, i int) (load.Locker, error) {
		c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1, MinIdleConns: 1, MaxRetries: -1, Protocol: 2,
			DisableIdentity: true, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second})
		if err := c.Ping(ctx).Err(); err != nil {
			c.Close()
			return nil, err
		}
		if err := unlockScript.Load(ctx, c).Err(); err != nil {
			c.Close()
			return nil, err
		}
		return &redisLocker{c: c, val: fmt.Sprintf("bench-%d-%d", i, time.Now().UnixNano()), lease: lease}, nil
	}
}

func (r *redisLocker) Acquire(ctx context.Context, key string, wait bool) (load.Grant, error) {
	sent := time.Now()
	for {
		ok, err := r.c.SetNX(ctx, key, r.val, r.lease).Result()
		if err != nil {
			return load.Grant{}, err
		}
		if ok {
			return load.Grant{Sent: sent, Replied: time.Now()}, nil
		}
		if !wait {
			return load.Grant{}, load.ErrHeld
		}
		load.Sleep(ctx, time.Millisecond)
		if ctx.Err() != nil {
			return load.Grant{}, ctx.Err()
		}
	}
}

func (r *redisLocker) Release(ctx context.Context, key string) error {
	n, err := unlockScript.EvalSha(ctx, r.c, []string{key}, r.val).Int()
	if err != nil {
		return err
	}
	if n != 1 {
		return errors.New("compare-and-delete found another owner")
	}
	return nil
}

func (r *redisLocker) Close() error { return r.c.Close() }

// ---- ZooKeeper: the standard lock recipe (ephemeral sequential znodes,
// wait on the predecessor), as github.com/go-zookeeper/zk implements it.

type zkLocker struct {
	c     *zk.Conn
	mu    sync.Mutex
	locks map[string]*zk.Lock
}

func dialZK(addr string) load.Dialer {
	return func(ctx context.Context, i int) (load.Locker, error) {
		c, ev, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(quietZK{}))
		if err != nil {
			return nil, err
		}
		for {
			select {
			case e := <-ev:
				if e.State == zk.StateHasSession {
					return &zkLocker{c: c, locks: map[string]*zk.Lock{}}, nil
				}
			case <-ctx.Done():
				c.Close()
				return nil, ctx.Err()
			}
		}
	}
}

type quietZK struct{}

func (quietZK) Printf(string, ...any) {}

func (z *zkLocker) lock(key string) *zk.Lock {
	z.mu.Lock()
	defer z.mu.Unlock()
	l, ok := z.locks[key]
	if !ok {
		l = zk.NewLock(z.c, "/bench/"+key, zk.WorldACL(zk.PermAll))
		z.locks[key] = l
	}
	return l
}

func (z *zkLocker) Acquire(ctx context.Context, key string, wait bool) (load.Grant, error) {
	// The recipe has no context: closing the session is the way to stop a
	// waiter at the end of a run.
	stop := context.AfterFunc(ctx, z.c.Close)
	defer stop()
	sent := time.Now()
	if err := z.lock(key).Lock(); err != nil {
		return load.Grant{}, err
	}
	return load.Grant{Sent: sent, Replied: time.Now()}, nil
}

func (z *zkLocker) Release(_ context.Context, key string) error { return z.lock(key).Unlock() }

func (z *zkLocker) Close() error {
	z.c.Close()
	return nil
}

// ---- Empty gRPC round trips: the same connection-per-client pattern
// and the same requests and replies as the lock client (a W1 pair's
// ACQUIRE and RELEASE LockOperationRequests, each answered with a
// LockOperationResponse of a grant's shape), against a server whose unary
// handler answers at once with a prepared reply. Until December 2026 the
// floor sent HealthCheckRequests and decoded HealthCheckResponses: its
// load generator then spent ~17% less CPU per pair than the lock
// client's, which near the load generator's saturation (W1 c=64) weighed
// on nacos-lockd's pairs/s ratio to it.

type noopLocker struct {
	cc    *grpc.ClientConn
	req   pb.RequestClient
	owner string
	lease int64 // ms
}

func dialNoop(addr string, lease int64) load.Dialer {
	return func(ctx context.Context, i int) (load.Locker, error) {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, err
		}
		n := &noopLocker{cc: cc, req: pb.NewRequestClient(cc), owner: fmt.Sprintf("bench-%d-%d", i, time.Now().UnixNano()), lease: lease}
		if _, err := n.call(ctx, &protocol.HealthCheckRequest{}); err != nil {
			cc.Close()
			return nil, err
		}
		return n, nil
	}
}

func (n *noopLocker) call(ctx context.Context, m protocol.Message) (protocol.Message, error) {
	p, err := protocol.EncodeWith(m, "127.0.0.1", nil)
	if err != nil {
		return nil, err
	}
	out, err := n.req.Request(ctx, p)
	if err != nil {
		return nil, err
	}
	return protocol.Decode(out)
}

// lock sends one LockOperationRequest as the lock client does and checks
// the reply the same way.
func (n *noopLocker) lock(ctx context.Context, op protocol.LockOp, li protocol.LockInstance) error {
	m, err := n.call(ctx, &protocol.LockOperationRequest{LockInstance: &li, LockOperationEnum: op})
	if err != nil {
		return err
	}
	r, ok := m.(*protocol.LockOperationResponse)
	if !ok {
		return fmt.Errorf("reply %s, want a LockOperationResponse", m.TypeName())
	}
	if r.ResultCode != 200 || !r.Result {
		return fmt.Errorf("refused: code %d %s", r.ResultCode, r.Message)
	}
	return nil
}

func (n *noopLocker) Acquire(ctx context.Context, key string, _ bool) (load.Grant, error) {
	return load.Grant{}, n.lock(ctx, protocol.OpAcquire, lockclient.Instance(key, "NON_REENTRANT", n.owner, lockclient.Ms(n.lease), nil))
}

func (n *noopLocker) Release(ctx context.Context, key string) error {
	return n.lock(ctx, protocol.OpRelease, lockclient.Instance(key, "NON_REENTRANT", n.owner, lockclient.Ms(0), nil))
}

func (n *noopLocker) Close() error { return n.cc.Close() }

// noopServer answers a HealthCheckRequest (the client's first call) with
// a HealthCheckResponse, and every other unary request with a prepared
// LockOperationResponse shaped as a grant's, and does nothing else.
type noopServer struct {
	pb.UnimplementedRequestServer
	health, reply *pb.Payload
}

func (s *noopServer) Request(_ context.Context, p *pb.Payload) (*pb.Payload, error) {
	if p.GetMetadata().GetType() == "HealthCheckRequest" {
		return s.health, nil
	}
	return s.reply, nil
}

// noopReplies are the noop server's two prepared replies.
func noopReplies() (health, reply *pb.Payload, err error) {
	if health, err = protocol.Encode(&protocol.HealthCheckResponse{ResponseBase: protocol.Success()}); err != nil {
		return nil, nil, err
	}
	grant := protocol.NewLockOperationResponse(protocol.Success(), protocol.LockResult{Success: true, ReentrantCount: 1, WaitPosition: -1, FencingToken: 1 << 20})
	if reply, err = protocol.Encode(grant); err != nil {
		return nil, nil, err
	}
	return health, reply, nil
}

func serveNoop(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("nacos-lock-bench serve-noop", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:19848", "listen address")
	optList := fs.String("grpc-options", "", "server options to measure against the default, comma-separated: "+
		"stats (a stats handler that tags connections, as nacos-lockd's did), shared-write-buffer, workers=N, "+
		"write-buffer=BYTES, read-buffer=BYTES, window=BYTES (a static flow-control window, which turns off BDP pings)")
	transport := fs.String("transport", "grpc-go", "grpc-go; h2lite: a lean HTTP/2 server of this tool's own (h2lite.go), to measure the wire without grpc-go's server transport; "+
		"or h2grpc: nacos-lockd's own transport (transport/h2grpc) with the empty handler, the floor of nacos-lockd's wire")
	if err := fs.Parse(args); err != nil {
		return err
	}
	opts, err := noopServerOptions(*optList)
	if err != nil {
		return err
	}
	health, reply, err := noopReplies()
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	if *transport == "h2lite" {
		// The same work per call as the grpc-go handler: unmarshal the
		// request Payload, marshal the prepared reply.
		go func() {
			<-ctx.Done()
			lis.Close()
		}()
		fmt.Fprintln(stderr, "noop h2lite server on", lis.Addr())
		return serveH2Lite(lis, func(req []byte) ([]byte, error) {
			var in pb.Payload
			if err := proto.Unmarshal(req, &in); err != nil {
				return nil, err
			}
			out, _ := (&noopServer{health: health, reply: reply}).Request(ctx, &in)
			return proto.Marshal(out)
		})
	} else if *transport == "h2grpc" {
		hs := h2grpc.NewServer(h2grpc.Config{}, h2grpc.Handlers{
			Unary: (&noopServer{health: health, reply: reply}).Request,
		})
		go func() {
			<-ctx.Done()
			hs.Stop()
		}()
		fmt.Fprintln(stderr, "noop h2grpc server on", lis.Addr())
		if err := hs.Serve(lis); ctx.Err() == nil {
			return err
		}
		return nil // stopped, as grpc-go's Serve after Stop
	} else if *transport != "grpc-go" {
		return fmt.Errorf("unknown transport %q", *transport)
	}
	gs := grpc.NewServer(opts...)
	pb.RegisterRequestServer(gs, &noopServer{health: health, reply: reply})
	go func() {
		<-ctx.Done()
		gs.Stop()
	}()
	fmt.Fprintln(stderr, "noop gRPC server on", lis.Addr())
	return gs.Serve(lis)
}

// noopServerOptions maps serve-noop's --grpc-options to server options, so
// the floor can be measured with each option a server might use.
func noopServerOptions(list string) ([]grpc.ServerOption, error) {
	var opts []grpc.ServerOption
	for _, o := range strings.Split(list, ",") {
		name, val, _ := strings.Cut(strings.TrimSpace(o), "=")
		n, _ := strconv.Atoi(val)
		switch name {
		case "":
		case "stats":
			opts = append(opts, grpc.StatsHandler(taggingStats{}))
		case "shared-write-buffer":
			opts = append(opts, grpc.SharedWriteBuffer(true))
		case "workers":
			opts = append(opts, grpc.NumStreamWorkers(uint32(n)))
		case "write-buffer":
			opts = append(opts, grpc.WriteBufferSize(n))
		case "read-buffer":
			opts = append(opts, grpc.ReadBufferSize(n))
		case "window": // a static flow-control window: no BDP pings
			opts = append(opts, grpc.InitialWindowSize(int32(n)), grpc.InitialConnWindowSize(int32(n)))
		default:
			return nil, fmt.Errorf("unknown gRPC option %q", o)
		}
	}
	return opts, nil
}

// taggingStats is a stats handler that only tags each connection, the
// least a server that ties calls to their connection through stats can do.
type taggingStats struct{}

type noopConnKey struct{}

func (taggingStats) TagConn(ctx context.Context, info *stats.ConnTagInfo) context.Context {
	return context.WithValue(ctx, noopConnKey{}, info.RemoteAddr)
}
func (taggingStats) HandleConn(context.Context, stats.ConnStats)                     {}
func (taggingStats) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (taggingStats) HandleRPC(context.Context, stats.RPCStats)                       {}

// ---- Raw dragonboat proposals, in this process: dragonboat's own log
// (pebble with the settings a nacos-lockd node gives it, but without the
// node's padded write-ahead files, replica/walfile: those are ours) and
// the Raft clock of a single node, commands of a lock command's size, no
// network and no gateway. W1: one "pair" is two proposals to a no-op
// state machine. W2: the floor of a hand-off, one key whose state machine
// keeps only a holder and a FIFO queue, and hands the lock to the next
// waiter's caller when the holder's release applies: one Raft entry per
// hand-off and nothing else (no wire, no claim, no leases).

type raftNoop struct {
	nh      *dragonboat.NodeHost
	session func() *client.Session
	cmdSize int // bytes per proposal: a lock command's
	dir     string
	sm      *fifoSM
}

// Proposals are an op byte, the caller's id and padding to cmdSize.
const (
	opNoop byte = iota
	opFIFOAcquire
	opFIFORelease
)

// fifoSM is raft-noop's state machine: no-ops, and one lock with a FIFO
// queue for W2. Update runs on dragonboat's apply goroutine alone.
type fifoSM struct {
	holder int // caller id + 1; 0: free
	queue  []int
	// grants[id] receives the index of the entry that handed caller id the
	// lock (its fencing token); one grant at most is outstanding per caller.
	mu     sync.Mutex
	grants map[int]chan uint64
}

func (f *fifoSM) waiter(id int) chan uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch, ok := f.grants[id]
	if !ok {
		ch = make(chan uint64, 1)
		f.grants[id] = ch
	}
	return ch
}

func (f *fifoSM) Update(e sm.Entry) (sm.Result, error) {
	if len(e.Cmd) < 9 || e.Cmd[0] == opNoop {
		return sm.Result{Value: 1}, nil
	}
	id := int(binary.BigEndian.Uint64(e.Cmd[1:9]))
	switch e.Cmd[0] {
	case opFIFOAcquire:
		if f.holder == 0 {
			f.holder = id + 1
			return sm.Result{Value: e.Index}, nil // granted: the entry's index is the token
		}
		f.queue = append(f.queue, id)
		return sm.Result{Value: 0}, nil // queued
	case opFIFORelease:
		if f.holder != id+1 {
			return sm.Result{Value: 0}, nil
		}
		f.holder = 0
		if len(f.queue) > 0 {
			next := f.queue[0]
			f.queue = f.queue[1:]
			f.holder = next + 1
			select {
			case f.waiter(next) <- e.Index:
			default: // never: a caller waits for one grant at a time
			}
		}
	}
	return sm.Result{Value: 1}, nil
}

// Snapshots are empty: a bench run never restarts its node, so nothing
// ever recovers from one.
func (*fifoSM) Lookup(any) (any, error) { return nil, nil }
func (*fifoSM) SaveSnapshot(io.Writer, sm.ISnapshotFileCollection, <-chan struct{}) error {
	return nil
}
func (*fifoSM) RecoverFromSnapshot(io.Reader, []sm.SnapshotFile, <-chan struct{}) error { return nil }
func (*fifoSM) Close() error                                                            { return nil }

func startRaftNoop(ctx context.Context, dir string, port int) (*raftNoop, error) {
	dblogger.GetLogger("raft").SetLevel(dblogger.ERROR)
	for _, p := range []string{"rsm", "transport", "dragonboat", "raftpb", "logdb", "config", "settings", "grpc"} {
		dblogger.GetLogger(p).SetLevel(dblogger.ERROR)
	}
	rtt, electionRTT, heartbeatRTT := settings.RaftTicks(settings.ElectionTimeoutSingleMs, true)
	nhDir := filepath.Join(dir, "raft")
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	nh, err := dragonboat.NewNodeHost(config.NodeHostConfig{
		NodeHostDir: nhDir, WALDir: nhDir, RTTMillisecond: rtt, RaftAddress: addr,
		Expert: config.ExpertConfig{LogDB: replica.LogDBConfig()},
	})
	if err != nil {
		return nil, err
	}
	f := &fifoSM{grants: map[int]chan uint64{}}
	err = nh.StartReplica(map[uint64]dragonboat.Target{1: addr}, false,
		func(uint64, uint64) sm.IStateMachine { return f },
		config.Config{ReplicaID: 1, ShardID: 1, CheckQuorum: true, PreVote: true, ElectionRTT: electionRTT, HeartbeatRTT: heartbeatRTT,
			SnapshotEntries: 10000, CompactionOverhead: 5000})
	if err != nil {
		nh.Close()
		return nil, err
	}
	for {
		if _, _, ok, err := nh.GetLeaderID(1); err == nil && ok {
			break
		}
		if ctx.Err() != nil {
			nh.Close()
			return nil, ctx.Err()
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd := statemachine.Command{Op: statemachine.OpAcquire, NowMs: time.Now().UnixMilli(), Kind: statemachine.KindNonReentrant,
		Key: "bench-w1-1234567890-12", Owner: "bench-12-1234567890123456789", ConnID: "1700000000000_127.0.0.1_54321_1",
		LeaseMs: 30000}.Encode()
	return &raftNoop{nh: nh, session: func() *client.Session { return nh.GetNoOPSession(1) }, cmdSize: len(cmd), dir: dir, sm: f}, nil
}

// raftNoopChild runs a raft-noop point in a child process of this binary
// started on o.serverCPUs, so the dragonboat node is pinned like every
// other server. Its callers are in-process, so they run on those CPUs too
// and its CPU per op includes them.
func raftNoopChild(ctx context.Context, o options, progress io.Writer) (load.Report, error) {
	self := o.self
	if self == "" {
		var err error
		if self, err = os.Executable(); err != nil {
			return load.Report{}, err
		}
	}
	args := []string{"--target", "raft-noop", "--workload", o.workload, "--clients", strconv.Itoa(o.clients),
		"--duration", o.duration.String(), "--warmup", o.warmup.String(), "--lease", strconv.FormatInt(o.lease, 10), "--json"}
	if o.rate > 0 {
		args = append(args, "--rate", strconv.FormatFloat(o.rate, 'g', -1, 64))
	}
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, self, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if progress != nil {
		cmd.Stderr = io.MultiWriter(&errOut, progress)
	} else {
		cmd.Args = append(cmd.Args, "--quiet")
	}
	if err := peers.StartCmd(cmd, o.serverCPUs); err != nil {
		return load.Report{}, fmt.Errorf("raft-noop child: %w", err)
	}
	pinErr := peers.CheckAffinity(cmd.Process.Pid, o.serverCPUs)
	if err := cmd.Wait(); err != nil {
		return load.Report{}, fmt.Errorf("raft-noop child: %w\n%s", err, peers.LastLines(errOut.String(), 10))
	}
	var rep load.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		return load.Report{}, fmt.Errorf("raft-noop child report: %w", err)
	}
	// The child's own "in-process" note says the same of the child.
	rep.Notes = slices.DeleteFunc(rep.Notes, func(n string) bool { return strings.HasPrefix(n, "in-process:") })
	rep.Notes = append(rep.Notes, fmt.Sprintf("a child process pinned to CPU %s: CPU and RSS are the child's, its in-process callers included", o.serverCPUs))
	if pinErr != nil {
		rep.Notes = append(rep.Notes, "pinning not confirmed: "+pinErr.Error())
	}
	return rep, nil
}

func (r *raftNoop) close() {
	r.nh.Close()
	_ = os.RemoveAll(r.dir)
}

func (r *raftNoop) dialer() load.Dialer {
	return func(_ context.Context, i int) (load.Locker, error) {
		return &raftNoopLocker{r: r, id: i, grants: r.sm.waiter(i)}, nil
	}
}

// raftNoopLocker is one caller. A W1 pair is two no-op proposals; a W2
// acquire (one that may wait) takes the FIFO lock, waiting for the grant
// when it is queued, and the release after it gives the lock on.
type raftNoopLocker struct {
	r      *raftNoop
	id     int
	grants chan uint64
	held   bool
}

// propose makes a fresh command each time: one that timed out may still
// be in dragonboat's queue, and must not change under it.
func (l *raftNoopLocker) propose(ctx context.Context, op byte) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cmd := make([]byte, l.r.cmdSize)
	cmd[0] = op
	binary.BigEndian.PutUint64(cmd[1:9], uint64(l.id))
	res, err := l.r.nh.SyncPropose(ctx, l.r.session(), cmd)
	return res.Value, err
}

func (l *raftNoopLocker) Acquire(ctx context.Context, _ string, wait bool) (load.Grant, error) {
	if !wait {
		_, err := l.propose(ctx, opNoop)
		return load.Grant{}, err
	}
	sent := time.Now()
	token, err := l.propose(ctx, opFIFOAcquire)
	replied := time.Now()
	if err != nil {
		return load.Grant{}, err
	}
	if token == 0 { // queued: the release before ours hands it on
		select {
		case token = <-l.grants:
		case <-ctx.Done():
			return load.Grant{}, ctx.Err()
		}
	}
	l.held = true
	return load.Grant{Sent: sent, Replied: replied, Token: token, HasToken: true}, nil
}

func (l *raftNoopLocker) Release(ctx context.Context, _ string) error {
	op := opNoop
	if l.held {
		op, l.held = opFIFORelease, false
	}
	_, err := l.propose(ctx, op)
	return err
}

func (*raftNoopLocker) Close() error { return nil }

// supports says whether a target can run a workload.
func supports(target, workload string) (bool, string) {
	switch {
	case isJavaTarget(target) && workload != "w1" && workload != "w2":
		return false, "the Java load program runs w1 and w2"
	case target == clusterTarget && workload != "w1" && workload != "w2":
		return false, "the cluster target runs w1 and w2 (w3-w5 measure one node: see nacos-lockd)"
	case workload == "w1":
		return true, ""
	case workload == "w2" && (target == "grpc-noop" || target == "h2grpc-noop"):
		return false, "a ceiling has no lock to contend"
	case workload == "w2":
		return true, ""
	case target == "nacoslock":
		return false, "the package's target runs w1 and w2 (w3-w5 measure the server: see nacos-lockd)"
	case strings.HasPrefix(target, "nacos"):
		return true, ""
	}
	return false, "only nacos-lockd runs w3-w5"
}
