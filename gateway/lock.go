package gateway

import (
	"context"
	"errors"
	"fmt"
	"time"

	"nacos-lockd/control"
	"nacos-lockd/gateway/auth"
	"nacos-lockd/protocol"
	"nacos-lockd/protocol/pb"
	"nacos-lockd/statemachine"
	"nacos-lockd/statemachine/lockview"
	"nacos-lockd/transport/h2grpc"
)

// Nacos's validation messages (docs/lock-semantics.md §3.1), and ours for the
// limits Nacos does not have.
const (
	msgNoInstance    = "LockInstance cannot be null"
	msgNoKey         = "Lock key cannot be null or empty"
	msgBadTypeFormat = "Invalid lock type: %s, expected REENTRANT, NON_REENTRANT or NACOS_LOCK"
	msgZeroAcquire   = "Lock expiredTime must be non-zero for ACQUIRE"
	msgZeroRenew     = "Lock expiredTime must be non-zero for RENEW"
	msgNoHandler     = "There is no Handler of such operations!"
	// msgClaimNotRecorded answers requests that follow, on the same
	// connection, a claim answered from a read whose record failed.
	msgClaimNotRecorded = "An earlier lock grant on this connection could not be recorded; the connection is being closed"
)

// lock handles one LockOperationRequest. It always answers with a
// LockOperationResponse: refusals are 200 with result false, invalid
// requests and internal failures 500 with the Nacos message.
func (s *Server) lock(ctx context.Context, c *conn, p *pb.Payload, req *protocol.LockOperationRequest) *protocol.LockOperationResponse {
	start := time.Now()
	nacosOp := nacosOpOf(req.LockOperationEnum)
	if !c.limiter.AllowN(start, 1) {
		// Nacos's OVER_THRESHOLD, but in the lock response type: an
		// ErrorResponse would make the client resend at once.
		s.m.limited("requests_per_second")
		s.m.request("invalid", "limited", time.Since(start), nacosOp)
		msg := fmt.Sprintf("Too many lock requests on this connection: the limit is %g per second", s.cfg.RequestsPerSecond)
		return protocol.NewLockOperationResponse(
			protocol.Failure(protocol.CodeFailure, protocol.CodeOverThreshold, msg),
			protocol.LockResult{WaitPosition: protocol.NoWaitPosition, ErrorMessage: msg},
		)
	}
	var user auth.User
	if s.cfg.Auth != nil {
		// As Nacos's auth filter, identity is checked before anything else.
		token, _ := protocol.Header(p, "accessToken")
		u, err := s.cfg.Auth.Verify(token)
		if err != nil {
			return s.denied(c, start, nacosOp, "unauthenticated", err)
		}
		user = u
	}
	cmd, msg := s.command(c, req)
	if msg != "" {
		c.log.Debug().Str("op", string(req.LockOperationEnum)).Str("reason", msg).Msg("lock request rejected")
		s.m.request("invalid", "invalid", time.Since(start), nacosOp)
		return lockFailure(msg)
	}
	if s.cfg.Auth != nil && !user.Can("w", cmd.Key) {
		return s.denied(c, start, nacosOp, "forbidden", auth.ErrForbidden)
	}
	if dl, ok := ctx.Deadline(); !ok || dl.Sub(start) > s.cfg.RequestTimeout {
		// The h2 transport bounds every call by RequestTimeout already
		// (MaxCallDuration): a second context and timer per request cost
		// 1-2% of the server's CPU under load. grpc-go's does not.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.cfg.RequestTimeout)
		defer cancel()
	}
	switch {
	case cmd.Op == statemachine.OpRelease:
		if done := s.pushAhead(cmd); done != nil {
			defer done()
		}
	case cmd.Op == statemachine.OpAcquire && cmd.Retry:
		// A claim sent on a push ahead may come before the release that
		// grants it has been applied.
		if r := s.awaitGrant(ctx, c, cmd); r != nil {
			c.log.Debug().Str("op", cmd.Op.String()).Str("key", cmd.Key).Str("owner", cmd.Owner).
				Uint64("token", r.res.Token).Bool("written_at_apply", h2grpc.Replied(ctx)).Msg("lock request: claim answered at apply")
			s.m.outcome(cmd, r.res)
			s.m.request(opLabel(cmd.Op), resultLabel(cmd.Op, r.res), time.Since(start), nacosOp)
			return lockReply(cmd.Op, r.res)
		}
	}
	earlier := c.pendingRecord()
	res, claimed := s.claimByRead(ctx, c, cmd, s.table.LockLinearizable)
	var err error
	if !claimed {
		res, err = s.propose(ctx, c, cmd)
	}
	if err == nil && earlier != nil && !c.recordsHeld(ctx, earlier) {
		// A claim answered earlier on this connection was not recorded: the
		// client holds a grant the table gave away, and the connection is
		// being dropped for it. An answer computed without that grant must
		// not reach the client as if it had been (a re-entry "held by
		// another owner", a release "not held"): its outcome is left
		// unknown, as the connection's loss says.
		c.log.Warn().Str("op", cmd.Op.String()).Msg("lock request after a claim that was not recorded: answered with a failure")
		s.m.request(opLabel(cmd.Op), "unavailable", time.Since(start), nacosOp)
		return lockFailure(msgClaimNotRecorded)
	}
	if err != nil {
		c.log.Warn().Err(err).Str("op", cmd.Op.String()).Msg("lock command not committed")
		s.m.request(opLabel(cmd.Op), "unavailable", time.Since(start), nacosOp)
		return lockFailure(writeFailure(req.LockOperationEnum))
	}
	if limit := verdictOf(res.Code).limit; limit != "" {
		s.m.limited(limit)
		s.m.request(opLabel(cmd.Op), "limited", time.Since(start), nacosOp)
		c.log.Debug().Str("limit", limit).Msg("lock request refused by a table limit")
		return protocol.NewLockOperationResponse(
			protocol.Failure(protocol.CodeFailure, protocol.CodeOverThreshold, message(res)),
			protocol.LockResult{WaitPosition: protocol.NoWaitPosition, ErrorMessage: message(res)},
		)
	}
	if res.Code == statemachine.CodeMalformed {
		// The gateway validated the command, so this is our bug, not the client's.
		c.log.Error().Str("op", cmd.Op.String()).Msg("state machine rejected a validated command")
		s.m.request(opLabel(cmd.Op), "error", time.Since(start), nacosOp)
		return lockFailure(message(res))
	}
	c.log.Debug().Str("op", cmd.Op.String()).Str("key", cmd.Key).Str("owner", cmd.Owner).
		Str("result", res.Code.String()).Int32("count", res.Count).Int32("position", res.WaitPosition).
		Uint64("token", res.Token).Msg("lock request")
	s.m.outcome(cmd, res)
	s.m.request(opLabel(cmd.Op), resultLabel(cmd.Op, res), time.Since(start), nacosOp)
	return lockReply(cmd.Op, res)
}

// propose commits cmd. An ACQUIRE or CANCEL_WAIT the table answers
// CodeClaimPending (the owner's unclaimed grant is bound to another
// connection, where its claim may have been answered from a read and not
// recorded yet) is proposed again, restamped, until the grant is claimed
// (then it is a re-entry, or a cancel that keeps the lock) or gone, or ctx
// ends: the record comes within milliseconds, or seconds across a leader
// change, and a grant nobody claimed ends with its connection's cleanup
// or its lease.
func (s *Server) propose(ctx context.Context, c *conn, cmd statemachine.Command) (statemachine.Result, error) {
	backoff := 2 * time.Millisecond
	for {
		res, err := s.table.Propose(ctx, cmd)
		if err != nil || res.Code != statemachine.CodeClaimPending {
			return res, err
		}
		s.m.proposedAgain(cmd.Op)
		c.log.Debug().Str("key", cmd.Key).Str("owner", cmd.Owner).Dur("backoff", backoff).
			Str("op", cmd.Op.String()).Msg("command from another connection while the owner's grant is unclaimed: proposing again")
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return res, fmt.Errorf("%s while the owner's grant may be claimed on another connection: %w", cmd.Op, ctx.Err())
		case <-t.C:
		}
		backoff = min(2*backoff, 100*time.Millisecond)
		cmd.NowMs = s.now().UnixMilli()
	}
}

// claimByRead answers a waiter's claim of the grant it was pushed without
// a Raft entry on the hand-off's path (statemachine/DESIGN.md, FIFO
// hand-off): a linearizable read shows the grant still there, unclaimed,
// bound to this connection, with at least half the requested lease left;
// then the claim is answered as the ACQUIRE would be (count 1, the grant's
// token) and recorded by a CLAIM queued before the reply goes out, so it
// is committed ahead of anything the client sends next. If the record is
// not committed, or is refused when it applies (it came later than the half
// lease the read left, and the grant had passed on: a leader change can
// take that long), the connection is dropped: its cleanup then releases
// the lock, and the requests the client sent after the claim are answered
// with a failure (see lock), not with what the table says without the grant.
// read is the linearizable read it checks: LockLinearizable, or at apply
// LockIfSoleVoter's (answerAtApply).
func (s *Server) claimByRead(ctx context.Context, c *conn, cmd statemachine.Command, read lockRead) (statemachine.Result, bool) {
	if cmd.Op != statemachine.OpAcquire || !cmd.Retry {
		return statemachine.Result{}, false
	}
	token, ok := c.takeClaim(cmd.Kind, cmd.Key, cmd.Owner)
	if !ok {
		return statemachine.Result{}, false
	}
	l, err := read(ctx, cmd.Kind, cmd.Key)
	if errors.Is(err, errNotSoleVoter) {
		// Nothing was read: the handler reads the usual way.
		c.returnClaim(cmd.Kind, cmd.Key, cmd.Owner, token)
		return statemachine.Result{}, false
	}
	if err != nil || l.Owner != cmd.Owner || !l.Unclaimed || l.Token != token || l.ConnID != cmd.ConnID ||
		l.LeaseEndMs-cmd.NowMs < cmd.LeaseMs/2 {
		return statemachine.Result{}, false
	}
	// The claim takes effect at the read, so its lease runs from there: the
	// table clock the read saw (or this request's stamp, if later), which
	// is what the claiming ACQUIRE would have counted from. The record
	// applies after the answer, and later commands may move the clock on
	// meanwhile.
	rec := statemachine.Command{Op: statemachine.OpClaim, NowMs: max(cmd.NowMs, l.Clock), Kind: cmd.Kind, Key: cmd.Key,
		Owner: cmd.Owner, ConnID: cmd.ConnID, LeaseMs: cmd.LeaseMs, Token: token, LeaseAtNow: true}
	done, err := s.table.Record(time.Now().Add(s.cfg.RequestTimeout), rec)
	if err != nil {
		return statemachine.Result{}, false // not queued: claim the usual way
	}
	s.m.readClaim("answered")
	finish := c.startRecord()
	go func() {
		err := <-done
		if err != nil {
			s.m.readClaim("record_failed")
			c.log.Warn().Err(err).Str("key_type", cmd.Kind.String()).Msg("claim answered from a read was not recorded; dropping the connection")
			c.dropConn("claim record not committed or refused")
		}
		finish(err != nil)
	}()
	return statemachine.Result{Code: statemachine.CodeOK, Count: 1, WaitPosition: -1, Token: token}, true
}

// lockRead reads one lock linearizably (see claimByRead).
type lockRead func(ctx context.Context, kind statemachine.Kind, key string) (lockview.Lock, error)

// errNotSoleVoter is soleVoterRead's answer on a node that is not its
// shard's sole voter: its reads are linearizable only through ReadIndex,
// which waits, and at apply nothing may wait.
var errNotSoleVoter = errors.New("not the shard's sole voter: a read would have to wait")

// soleVoterRead is the read of a claim answered at apply.
func (s *Server) soleVoterRead(_ context.Context, kind statemachine.Kind, key string) (lockview.Lock, error) {
	l, ok := s.table.LockIfSoleVoter(kind, key)
	if !ok {
		return lockview.Lock{}, errNotSoleVoter
	}
	return l, nil
}

// awaitGrant lets a claim (a waiter's ACQUIRE with waiterRetry) wait for
// the grant of a push ahead (conn.awaitAhead), offering it to be answered
// the moment the grant applies: Notify then runs answerAtApply in Raft's
// apply goroutine, instead of waking this handler to answer after the
// apply goroutine has finished the rest of its entry and the handler's turn
// on the CPU has come. It returns that answer (written already, or for
// the handler to return), or nil: then the claim goes on as any other.
// Only the h2 transport can write a reply from another goroutine.
func (s *Server) awaitGrant(ctx context.Context, c *conn, cmd statemachine.Command) *claimAtApply {
	k := claimKey{cmd.Kind, cmd.Key, cmd.Owner}
	if !h2grpc.CanTryReply(ctx) {
		c.awaitAhead(ctx, k, nil)
		return nil
	}
	ca := &claimAtApply{done: make(chan struct{})}
	ca.answer = func() { s.answerAtApply(ctx, c, cmd, ca) }
	if !c.awaitAhead(ctx, k, ca) || !ca.claimed {
		return nil
	}
	return ca
}

// answerAtApply answers a claim in Notify, right after its grant applied,
// if it can do so without waiting for anything: the node is its shard's
// sole voter (so its own replica is a linearizable read), every claim
// recorded earlier on the connection has taken effect, and the read shows
// the grant as claimByRead requires. The claim is recorded as claimByRead
// records it, and its reply written by h2grpc.TryReply if the connection
// takes it at once; if not, the handler writes it. Otherwise it does
// nothing, and the handler goes on as for any claim.
func (s *Server) answerAtApply(ctx context.Context, c *conn, cmd statemachine.Command, ca *claimAtApply) {
	if earlier := c.pendingRecord(); earlier != nil {
		select {
		case <-earlier:
		default:
			return // the handler waits for it
		}
		if !c.recordsHeld(ctx, nil) {
			return // the handler answers with the failure
		}
	}
	res, claimed := s.claimByRead(ctx, c, cmd, s.soleVoterRead)
	if !claimed {
		return
	}
	ca.claimed, ca.res = true, res
	out, err := encodeReply(c, lockReply(cmd.Op, res))
	if err == nil && h2grpc.TryReply(ctx, out) {
		s.m.claimWrittenAtApply()
	}
}

// denied answers an authentication or authorisation failure the way
// Nacos's auth filter does: the handler's response type, resultCode 500,
// errorCode 403. The attempt is counted and logged, never the token.
func (s *Server) denied(c *conn, start time.Time, nacosOp, reason string, err error) *protocol.LockOperationResponse {
	s.m.authFailure(reason)
	s.m.request("invalid", "denied", time.Since(start), nacosOp)
	c.mu.Lock()
	ip := c.clientIP
	c.mu.Unlock()
	c.log.Warn().Str("reason", reason).Str("client_ip", ip).Msg("lock request refused by auth")
	msg := err.Error()
	return protocol.NewLockOperationResponse(
		protocol.Failure(protocol.CodeFailure, protocol.CodeNoRight, msg),
		protocol.LockResult{WaitPosition: protocol.NoWaitPosition, ErrorMessage: msg},
	)
}

// command validates a request in Nacos's order and builds the Command.
// A non-empty message is a rejection.
func (s *Server) command(c *conn, req *protocol.LockOperationRequest) (statemachine.Command, string) {
	li := req.LockInstance
	if li == nil {
		return statemachine.Command{}, msgNoInstance
	}
	if li.Key == nil || *li.Key == "" {
		return statemachine.Command{}, msgNoKey
	}
	if n := len(*li.Key); n > s.cfg.MaxKeyLength {
		return statemachine.Command{}, fmt.Sprintf("Lock key is %d bytes, longer than the limit of %d bytes", n, s.cfg.MaxKeyLength)
	}
	if n := len(li.Params); n > s.cfg.MaxParamsBytes {
		return statemachine.Command{}, fmt.Sprintf("Lock params are %d bytes, more than the limit of %d bytes", n, s.cfg.MaxParamsBytes)
	}
	owner := li.Owner
	if n := len(owner); n > s.cfg.MaxOwnerLength {
		return statemachine.Command{}, fmt.Sprintf("Lock owner is %d bytes, longer than the limit of %d bytes", n, s.cfg.MaxOwnerLength)
	}
	if owner == "" {
		owner = c.id // Gen 1 clients send no owner: the connection owns the lock
	}
	typ := "null"
	if li.LockType != nil {
		typ = *li.LockType
	}
	kind, ok := statemachine.ParseKind(typ)
	if !ok {
		if len(typ) > 128 {
			typ = typ[:128] + "..."
		}
		return statemachine.Command{}, fmt.Sprintf(msgBadTypeFormat, typ)
	}
	cmd := statemachine.Command{
		NowMs:  s.now().UnixMilli(),
		Kind:   kind,
		Key:    *li.Key,
		Owner:  owner,
		ConnID: c.id,
		Retry:  li.WaiterRetry,
	}
	o, ok := clientOpByWire(req.LockOperationEnum)
	if !ok {
		// EXPIRE and CLEANUP_CONNECTION are the server's own, and anything
		// else (or nothing) is not an operation.
		return statemachine.Command{}, msgNoHandler
	}
	cmd.Op = o.op
	switch o.op {
	case statemachine.OpAcquire:
		if li.ExpiredTime == nil {
			return statemachine.Command{}, "Lock expiredTime is required for ACQUIRE"
		}
		if *li.ExpiredTime == 0 {
			return statemachine.Command{}, msgZeroAcquire
		}
		cmd.LeaseMs = s.lease(*li.ExpiredTime)
		cmd.MaxLocks, cmd.MaxWaiters = s.cfg.MaxLocks, s.cfg.MaxWaitersPerLock
		if w := li.WaitMs(); w > 0 {
			cmd.WaitMs = min(w, s.cfg.MaxWait.Milliseconds())
		}
	case statemachine.OpRenew:
		if li.ExpiredTime == nil {
			return statemachine.Command{}, "Lock expiredTime is required for RENEW"
		}
		if *li.ExpiredTime == 0 {
			return statemachine.Command{}, msgZeroRenew
		}
		cmd.LeaseMs = s.lease(*li.ExpiredTime)
	}
	return cmd, ""
}

// lease applies the Nacos lease rules: negative means the default, and
// anything longer than the maximum is capped.
func (s *Server) lease(expiredTime int64) int64 {
	if expiredTime < 0 {
		return s.cfg.DefaultLease.Milliseconds()
	}
	return min(expiredTime, s.cfg.MaxLease.Milliseconds())
}

func lockReply(op statemachine.Op, res statemachine.Result) *protocol.LockOperationResponse {
	if op == statemachine.OpRenew {
		// Nacos answers RENEW with the boolean only.
		return &protocol.LockOperationResponse{ResponseBase: protocol.Success(), Result: res.Success()}
	}
	lr := protocol.LockResult{
		Success:        res.Success(),
		ReentrantCount: int(res.Count),
		WaitPosition:   int(res.WaitPosition),
	}
	switch {
	case res.Success() && op == statemachine.OpAcquire:
		lr.FencingToken = res.Token
	case !res.Success() && res.WaitPosition < 0:
		lr.ErrorMessage = message(res)
	}
	return protocol.NewLockOperationResponse(protocol.Success(), lr)
}

func lockFailure(msg string) *protocol.LockOperationResponse {
	return protocol.NewLockOperationResponse(
		protocol.Failure(protocol.CodeFailure, 0, msg),
		protocol.LockResult{WaitPosition: protocol.NoWaitPosition, ErrorMessage: msg},
	)
}

// controlConfig is the control loops' part of the configuration, with the
// gateway's metrics told what they did.
func (s *Server) controlConfig() control.Config {
	lastPrune := s.now()
	return control.Config{
		NodeID:            s.cfg.NodeID,
		ScanInterval:      s.cfg.ScanInterval,
		RequestTimeout:    s.cfg.RequestTimeout,
		DisconnectGrace:   s.cfg.DisconnectGrace,
		NodeGrace:         s.cfg.NodeGrace,
		NodeCheckInterval: s.cfg.NodeCheckInterval,
		PeerAlive:         s.cfg.PeerAlive,
		Now:               s.now,
		Events: control.Events{
			Expired: s.m.expired,
			Cleaned: s.m.cleanup,
			// Metrics timings outlive no lease or wait: forget older ones, on
			// every node (timings are node-local), once a minute.
			Scanned: func(now time.Time) {
				if now.Sub(lastPrune) > time.Minute {
					s.m.prune(now, s.cfg.MaxLease+s.cfg.MaxWait)
					lastPrune = now
				}
			},
		},
	}
}
