package gateway

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"nacos-lockd/statemachine"
)

// Label values come from these closed sets only: never keys, owners,
// connection ids, IPs, params or tokens.
var (
	opLabels     = []string{"acquire", "release", "renew", "cancel_wait", "invalid"}
	resultLabels = []string{"granted", "queued", "refused", "released", "not_owner", "not_found", "renewed", "cancelled", "invalid", "denied", "limited", "unavailable", "error"}
	limitLabels  = []string{"connections", "connections_per_ip", "requests_per_second", "locks", "waiters_per_lock"}
	pushLabels   = []string{"lock_notification", "lock_notification_ahead", "connect_reset"}
	// readClaimLabels are the results of a claim answered from a read.
	readClaimLabels = []string{"answered", "record_failed"}
	// The SDK port's two methods (callUnary, callStream) and the HTTP/2
	// error codes the h2 transport closes connections with.
	callLabels      = [2]string{"request", "requestBiStream"}
	connErrorLabels = []string{"PROTOCOL_ERROR", "FLOW_CONTROL_ERROR", "STREAM_CLOSED", "FRAME_SIZE_ERROR", "COMPRESSION_ERROR", "ENHANCE_YOUR_CALM", "keepalive_timeout", "other"}
)

const (
	callUnary  = 0 // /Request/request
	callStream = 1 // /BiRequestStream/requestBiStream
)

// maxCode is the highest gRPC code; calls are counted under the 17.
const maxCode = codes.Unauthenticated

// metrics are the gateway's Prometheus series. A nil *metrics records
// nothing, so tests and tools need not register any.
type metrics struct {
	requests    *prometheus.CounterVec   // op, result
	latency     *prometheus.HistogramVec // op
	connections prometheus.Gauge
	connOpened  prometheus.Counter
	connClosed  prometheus.Counter
	pushes      *prometheus.CounterVec // type, result (sent, failed)
	waitTime    prometheus.Histogram
	handoff     prometheus.Histogram
	readClaims  *prometheus.CounterVec
	// claimPending: commands proposed again while the owner's grant may
	// be claimed on another connection (Server.propose), by op.
	claimPending *prometheus.CounterVec
	// claimsAtApply: claims whose reply was written at apply
	// (Server.answerAtApply).
	claimsAtApply prometheus.Counter
	holdTime      prometheus.Histogram
	endings       *prometheus.CounterVec // how holds end: release, expiry
	cleanups      *prometheus.CounterVec // reason: disconnect, node_down
	authFails     *prometheus.CounterVec // reason: unauthenticated, forbidden
	limits        *prometheus.CounterVec // limit

	// The SDK port's transport, the same on both (--transport): its
	// connections (trackedListener) and the calls it hands the gateway,
	// counted as they come and go; the counters are looked up once, so a
	// call costs two atomic adds.
	transportConns    prometheus.Gauge
	transportAccepted prometheus.Counter
	callsStarted      [2]prometheus.Counter
	callsHandled      [2][maxCode + 1]prometheus.Counter
	connErrors        *prometheus.CounterVec // code (h2 only)

	// The request series by label index (opLabels, resultLabels), so a
	// request finds its series without hashing its labels (WithLabelValues
	// and map lookups were most of what a request's metrics cost):
	// latencyOf is filled when m is built; requestCount as label pairs
	// first occur, so /metrics lists only the pairs that happened.
	latencyOf    []prometheus.Observer
	requestCount [][]atomic.Pointer[prometheus.Counter]

	// The series a hand-off touches on every push, claim and release,
	// looked up once for the same reason: pushSent and pushFailed by
	// pushLabels index, readClaimCount by readClaimLabels index.
	pushSent, pushFailed []prometheus.Counter
	pushMissed           prometheus.Counter
	readClaimCount       []prometheus.Counter
	endedByRelease       prometheus.Counter
	endedByExpiry        prometheus.Counter

	// Nacos's own series, so existing Nacos dashboards keep working: the
	// grpcLock*, grpcUnLock* and grpcRenew* counters as {Total, Success}.
	nacosLock, nacosUnlock, nacosRenew [2]prometheus.Gauge
	nacosRt                            prometheus.Summary
	nacosRtMax                         prometheus.Gauge
	rtMaxMu                            sync.Mutex
	rtMax                              atomicFloat

	// Timings the table cannot keep (apply never reads a clock): when this
	// node pushed a grant, when a waiter first queued, when a hold began.
	mu       sync.Mutex
	notified map[grantKey]time.Time // grant -> pushed
	queued   map[waitKey]time.Time
	held     map[waitKey]time.Time // holder -> granted
}

type waitKey struct {
	kind       statemachine.Kind
	key, owner string
}

// grantKey names one grant. Tokens alone do not: the locks granted by
// one grouped entry share its index, and so their token.
type grantKey struct {
	kind  statemachine.Kind
	key   string
	token uint64
}

const nacosMonitorHelp = statemachine.NacosMonitorHelp

var latencyBuckets = prometheus.ExponentialBuckets(0.0002, 2, 16) // 0.2 ms .. 6.5 s

func newMetrics(reg prometheus.Registerer) *metrics {
	if reg == nil {
		return nil
	}
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nacoslockd_lock_requests_total", Help: "Lock requests by operation and outcome."}, []string{"op", "result"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "nacoslockd_lock_request_duration_seconds", Help: "Lock request handling time, decode to reply.", Buckets: latencyBuckets}, []string{"op"}),
		connections: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nacoslockd_connections", Help: "Registered client connections on this node."}),
		connOpened: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nacoslockd_connections_opened_total", Help: "Client connections registered on this node."}),
		connClosed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nacoslockd_connections_closed_total", Help: "Client connections that ended on this node."}),
		pushes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nacoslockd_pushes_total", Help: "Server pushes by type and result (sent, failed; missed: a push ahead of a release whose grant went to someone else or nobody)."}, []string{"type", "result"}),
		waitTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "nacoslockd_lock_wait_seconds", Help: "Time from a waiter's first queued ACQUIRE to its grant being claimed.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 20)}),
		readClaims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nacoslockd_lock_read_claims_total", Help: "Claims of a pushed grant answered from a linearizable read: answered, and record_failed for those whose record was not committed or was refused (the connection is then dropped)."}, []string{"result"}),
		claimPending: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nacoslockd_lock_claim_pending_total", Help: "ACQUIREs and CANCEL_WAITs proposed again because the owner's grant was unclaimed and bound to another connection, where its claim may have been answered from a read and not recorded yet: one per proposal the table answered claim_pending."}, []string{"op"}),
		claimsAtApply: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nacoslockd_lock_claims_written_at_apply_total", Help: "Claims answered from a read (counted in nacoslockd_lock_read_claims_total) whose reply was written from Raft's apply goroutine as soon as the grant applied, instead of by the claim's handler afterwards."}),
		handoff: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "nacoslockd_lock_handoff_seconds", Help: "Time from a freed lock being granted to the next waiter (same Raft entry as the release) to that waiter claiming it.", Buckets: latencyBuckets}),
		holdTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "nacoslockd_lock_hold_seconds", Help: "Time from grant to final release, for holds granted and released through this node.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 24)}),
		endings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nacoslockd_lock_endings_total", Help: "Holds ended by the owner's final release or by the reaper's expiry (cleanups are counted in nacoslockd_connection_cleanups_total)."}, []string{"cause"}),
		cleanups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nacoslockd_connection_cleanups_total", Help: "CLEANUP_CONNECTION commands committed, by why they were proposed."}, []string{"reason"}),
		authFails: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nacoslockd_auth_failures_total", Help: "Lock requests refused by auth: no valid token, or no permission for the key."}, []string{"reason"}),
		limits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nacoslockd_limit_rejections_total", Help: "Connections and requests refused by a configured limit."}, []string{"limit"}),
		nacosRt: prometheus.NewSummary(prometheus.SummaryOpts{
			Name: "nacos_timer_seconds", Help: "Nacos lockHandlerRt: lock handler time.", ConstLabels: prometheus.Labels{"module": "lock", "name": "lockHandlerRt"}}),
		nacosRtMax: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nacos_timer_seconds_max", Help: "Nacos lockHandlerRt: longest lock handler time.", ConstLabels: prometheus.Labels{"module": "lock", "name": "lockHandlerRt"}}),
		transportConns: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nacoslockd_transport_connections", Help: "Connections open on the SDK port, registered or not (nacoslockd_connections counts the registered ones)."}),
		transportAccepted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nacoslockd_transport_connections_accepted_total", Help: "Connections accepted on the SDK port."}),
		connErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nacoslockd_transport_connection_errors_total", Help: "SDK-port connections closed because of the client: an HTTP/2 protocol violation or limit (the GOAWAY's error code) or an unanswered keepalive ping. The h2 transport counts them; grpc-go's reports none."}, []string{"code"}),
		requestCount: make([][]atomic.Pointer[prometheus.Counter], len(opLabels)),
		notified:     map[grantKey]time.Time{},
		queued:       map[waitKey]time.Time{},
		held:         map[waitKey]time.Time{},
	}
	started := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nacoslockd_grpc_calls_started_total", Help: "Calls on the SDK port that reached the gateway, by method (request, requestBiStream)."}, []string{"method"})
	handled := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nacoslockd_grpc_calls_handled_total", Help: "Calls on the SDK port whose handler returned, by method and the gRPC code it returned (Nacos's own errors travel in the reply, with code OK)."}, []string{"method", "code"})
	for i, method := range callLabels {
		m.callsStarted[i] = started.WithLabelValues(method)
		for code := codes.OK; code <= maxCode; code++ {
			m.callsHandled[i][code] = handled.WithLabelValues(method, code.String())
		}
	}
	for _, code := range connErrorLabels {
		m.connErrors.WithLabelValues(code)
	}
	reg.MustRegister(m.requests, m.latency, m.connections, m.connOpened, m.connClosed, m.pushes,
		m.waitTime, m.handoff, m.readClaims, m.claimPending, m.claimsAtApply, m.holdTime, m.endings, m.cleanups, m.authFails, m.limits, m.nacosRt, m.nacosRtMax,
		m.transportConns, m.transportAccepted, started, handled, m.connErrors)
	nacosGauge := func(name string) prometheus.Gauge {
		g := prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nacos_monitor", Help: nacosMonitorHelp,
			ConstLabels: prometheus.Labels{"module": "lock", "name": name}})
		reg.MustRegister(g)
		return g
	}
	m.nacosLock = [2]prometheus.Gauge{nacosGauge("grpcLockTotal"), nacosGauge("grpcLockSuccess")}
	m.nacosUnlock = [2]prometheus.Gauge{nacosGauge("grpcUnLockTotal"), nacosGauge("grpcUnLockSuccess")}
	m.nacosRenew = [2]prometheus.Gauge{nacosGauge("grpcRenewTotal"), nacosGauge("grpcRenewSuccess")}
	// Pre-create the series so dashboards see zeros, not gaps.
	for i, op := range opLabels {
		m.latencyOf = append(m.latencyOf, m.latency.WithLabelValues(op))
		m.requestCount[i] = make([]atomic.Pointer[prometheus.Counter], len(resultLabels))
	}
	for _, t := range pushLabels {
		m.pushSent = append(m.pushSent, m.pushes.WithLabelValues(t, "sent"))
		m.pushFailed = append(m.pushFailed, m.pushes.WithLabelValues(t, "failed"))
	}
	m.pushMissed = m.pushes.WithLabelValues("lock_notification_ahead", "missed")
	for _, r := range readClaimLabels {
		m.readClaimCount = append(m.readClaimCount, m.readClaims.WithLabelValues(r))
	}
	for _, op := range []statemachine.Op{statemachine.OpAcquire, statemachine.OpCancelWait} {
		m.claimPending.WithLabelValues(opLabel(op))
	}
	m.endedByRelease = m.endings.WithLabelValues("release")
	m.endedByExpiry = m.endings.WithLabelValues("expiry")
	for _, r := range []string{"disconnect", "node_down"} {
		m.cleanups.WithLabelValues(r)
	}
	for _, r := range []string{"unauthenticated", "forbidden"} {
		m.authFails.WithLabelValues(r)
	}
	for _, l := range limitLabels {
		m.limits.WithLabelValues(l)
	}
	return m
}

// request records one lock request: its outcome, latency and the Nacos
// counters. op is "invalid" for requests rejected before a command.
func (m *metrics) request(op string, result string, d time.Duration, nacosOp string) {
	if m == nil {
		return
	}
	o, r := labelIndex(opLabels, op), labelIndex(resultLabels, result)
	if o < 0 || r < 0 {
		// Not from the closed sets: a bug, but still counted.
		m.requests.WithLabelValues(op, result).Inc()
		m.latency.WithLabelValues(op).Observe(d.Seconds())
	} else {
		m.requestCounter(o, r).Inc()
		m.latencyOf[o].Observe(d.Seconds())
	}
	m.nacosRt.Observe(d.Seconds())
	if s := d.Seconds(); s > m.rtMax.Load() {
		// Rare once warm: only a new maximum takes the lock.
		m.rtMaxMu.Lock()
		if s > m.rtMax.Load() {
			m.rtMax.Store(s)
			m.nacosRtMax.Set(s)
		}
		m.rtMaxMu.Unlock()
	}
	// Nacos counts CANCEL_WAIT and unknown operations under "unlock".
	counts := &m.nacosUnlock
	switch nacosOp {
	case "acquire":
		counts = &m.nacosLock
	case "renew":
		counts = &m.nacosRenew
	}
	counts[0].Inc()
	if result == "granted" || result == "released" || result == "renewed" {
		counts[1].Inc()
	}
}

// atomicFloat is a float64 read without a lock.
type atomicFloat struct{ bits atomic.Uint64 }

func (f *atomicFloat) Load() float64   { return math.Float64frombits(f.bits.Load()) }
func (f *atomicFloat) Store(v float64) { f.bits.Store(math.Float64bits(v)) }

// labelIndex finds label in one of the closed label sets, -1 if absent.
// The sets are short and callers pass their own strings, so this is a few
// length compares.
func labelIndex(set []string, label string) int {
	for i, l := range set {
		if l == label {
			return i
		}
	}
	return -1
}

// requestCounter is the requests series of one label pair, by index.
func (m *metrics) requestCounter(op, result int) prometheus.Counter {
	p := &m.requestCount[op][result]
	if c := p.Load(); c != nil {
		return *c
	}
	c := m.requests.WithLabelValues(opLabels[op], resultLabels[result])
	p.Store(&c) // a racing store holds the same series
	return c
}

// outcome tracks the timings around one applied lock command on this node.
func (m *metrics) outcome(cmd statemachine.Command, res statemachine.Result) {
	if m == nil {
		return
	}
	now := time.Now()
	wk := waitKey{cmd.Kind, cmd.Key, cmd.Owner}
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case cmd.Op == statemachine.OpAcquire && res.Success() && res.Count == 1:
		gk := grantKey{cmd.Kind, cmd.Key, res.Token}
		if t, ok := m.notified[gk]; ok { // claim of a hand-off
			m.handoff.Observe(now.Sub(t).Seconds())
			delete(m.notified, gk)
		}
		if t, ok := m.queued[wk]; ok {
			m.waitTime.Observe(now.Sub(t).Seconds())
			delete(m.queued, wk)
		}
		if _, ok := m.held[wk]; !ok && len(m.held) < maxTracked {
			m.held[wk] = now
		}
	case cmd.Op == statemachine.OpAcquire && res.WaitPosition >= 0:
		if _, ok := m.queued[wk]; !ok && len(m.queued) < maxTracked {
			m.queued[wk] = now
		}
	case cmd.Op == statemachine.OpCancelWait:
		delete(m.queued, wk)
	case cmd.Op == statemachine.OpRelease && res.Success() && res.Count == 0:
		m.endedByRelease.Inc()
		if t, ok := m.held[wk]; ok {
			m.holdTime.Observe(now.Sub(t).Seconds())
			delete(m.held, wk)
		}
	}
}

// maxTracked bounds the timing maps: clients that vanish must not grow
// them without limit. Entries past it simply go unmeasured.
const maxTracked = 100_000

// prune forgets timings older than horizon: holds that ended by expiry
// or cleanup, waits abandoned without a cancel, grants never claimed.
// Without it those entries would fill the maps and stop the histograms.
func (m *metrics) prune(now time.Time, horizon time.Duration) {
	if m == nil {
		return
	}
	cutoff := now.Add(-horizon)
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, t := range m.held {
		if t.Before(cutoff) {
			delete(m.held, k)
		}
	}
	for k, t := range m.queued {
		if t.Before(cutoff) {
			delete(m.queued, k)
		}
	}
	for k, t := range m.notified {
		if t.Before(cutoff) {
			delete(m.notified, k)
		}
	}
}

func (m *metrics) pushed(typ string, err error) {
	if m == nil {
		return
	}
	i := labelIndex(pushLabels, typ)
	switch {
	case i < 0 && err != nil: // not from the closed set: a bug, but still counted
		m.pushes.WithLabelValues(typ, "failed").Inc()
	case i < 0:
		m.pushes.WithLabelValues(typ, "sent").Inc()
	case err != nil:
		m.pushFailed[i].Inc()
	default:
		m.pushSent[i].Inc()
	}
}

// pushAheadMissed counts a push sent ahead of a release whose grant went to
// someone else, or to nobody.
func (m *metrics) pushAheadMissed() {
	if m != nil {
		m.pushMissed.Inc()
	}
}

// readClaim counts a claim answered from a read ("answered") and one
// whose record then failed ("record_failed").
func (m *metrics) readClaim(result string) {
	if m == nil {
		return
	}
	if i := labelIndex(readClaimLabels, result); i >= 0 {
		m.readClaimCount[i].Inc()
		return
	}
	m.readClaims.WithLabelValues(result).Inc()
}

// claimWrittenAtApply counts a claim whose reply Notify wrote
// (Server.answerAtApply).
func (m *metrics) claimWrittenAtApply() {
	if m == nil {
		return
	}
	m.claimsAtApply.Inc()
}

// proposedAgain counts a command the table answered CodeClaimPending,
// which Server.propose proposes again. It is rare (a client that moved to
// this node right after a claim answered elsewhere), so the series is
// looked up by label.
func (m *metrics) proposedAgain(op statemachine.Op) {
	if m == nil {
		return
	}
	m.claimPending.WithLabelValues(opLabel(op)).Inc()
}

func (m *metrics) grantPushed(n statemachine.Notification) {
	if m == nil {
		return
	}
	m.mu.Lock()
	if len(m.notified) < maxTracked {
		m.notified[grantKey{n.Kind, n.Key, n.Token}] = time.Now()
	}
	m.mu.Unlock()
}

func (m *metrics) connOpen() {
	if m == nil {
		return
	}
	m.connections.Inc()
	m.connOpened.Inc()
}

func (m *metrics) connClose() {
	if m == nil {
		return
	}
	m.connections.Dec()
	m.connClosed.Inc()
}

func (m *metrics) transportOpen() {
	if m != nil {
		m.transportConns.Inc()
		m.transportAccepted.Inc()
	}
}

func (m *metrics) transportClose() {
	if m != nil {
		m.transportConns.Dec()
	}
}

func (m *metrics) callStarted(method int) {
	if m != nil {
		m.callsStarted[method].Inc()
	}
}

// callHandled counts a call by the code its handler's error becomes, as
// grpc-go's server makes it: a status's code, a context error's own,
// Unknown for anything else.
func (m *metrics) callHandled(method int, err error) {
	if m == nil {
		return
	}
	code := codes.OK
	if err != nil {
		if s, ok := status.FromError(err); ok {
			code = s.Code()
		} else if errors.Is(err, context.Canceled) {
			code = codes.Canceled
		} else if errors.Is(err, context.DeadlineExceeded) {
			code = codes.DeadlineExceeded
		} else {
			code = codes.Unknown
		}
	}
	if code > maxCode {
		code = codes.Unknown
	}
	m.callsHandled[method][code].Inc()
}

// connError counts a connection the h2 transport closed because of the
// client.
func (m *metrics) connError(code string) {
	if m == nil {
		return
	}
	for _, l := range connErrorLabels {
		if l == code {
			m.connErrors.WithLabelValues(code).Inc()
			return
		}
	}
	m.connErrors.WithLabelValues("other").Inc()
}

func (m *metrics) expired() {
	if m != nil {
		m.endedByExpiry.Inc()
	}
}

func (m *metrics) cleanup(reason string) {
	if m != nil {
		m.cleanups.WithLabelValues(reason).Inc()
	}
}

func (m *metrics) authFailure(reason string) {
	if m != nil {
		m.authFails.WithLabelValues(reason).Inc()
	}
}

func (m *metrics) limited(limit string) {
	if m != nil {
		m.limits.WithLabelValues(limit).Inc()
	}
}
