package replica

import (
	"strings"
	"testing"

	dblogger "github.com/lni/dragonboat/v4/logger"
	"github.com/rs/zerolog"

	"nacos-lockd/internal/syncbuf"
)

func TestDragonboatLevel(t *testing.T) {
	for _, c := range []struct {
		level  dblogger.LogLevel
		format string
		want   zerolog.Level
	}{
		// The start-up and read-path noise an operator took for alarms.
		{dblogger.WARNING, "StaleRead called, linearizability not guaranteed for stale read", zerolog.DebugLevel},
		{dblogger.WARNING, "%s had %d LocalTick msgs in one batch", zerolog.DebugLevel},
		{dblogger.WARNING, "%s became PreVote candidate", zerolog.DebugLevel},
		{dblogger.WARNING, "%s cast preVote from %s index %d term %d, log term: %d", zerolog.DebugLevel},
		{dblogger.WARNING, "mutual TLS disabled, communication is insecure", zerolog.DebugLevel},
		{dblogger.INFO, "%s applied ConfChange Add for %s", zerolog.DebugLevel},
		{dblogger.DEBUG, "anything", zerolog.TraceLevel},
		// What someone has to act on stays visible at info.
		{dblogger.WARNING, "%s has lost quorum", zerolog.WarnLevel},
		{dblogger.WARNING, "%s became unreachable, affected %d nodes", zerolog.WarnLevel},
		{dblogger.WARNING, "deployment id does not match %d vs %d, message dropped", zerolog.WarnLevel},
		{dblogger.WARNING, "stream snapshot to %s failed", zerolog.WarnLevel},
		{dblogger.ERROR, "failed to connect to %s", zerolog.ErrorLevel},
		{dblogger.CRITICAL, "anything", zerolog.PanicLevel},
	} {
		if got := dragonboatLevel(c.level, c.format); got != c.want {
			t.Errorf("%v %q: got %v, want %v", c.level, c.format, got, c.want)
		}
	}
}

// TestDragonboatAdapter sends messages through the adapter dragonboat is
// given, into a logger at info, and checks what is written and that
// Panicf still panics (dragonboat's code after it assumes it does not
// return).
func TestDragonboatAdapter(t *testing.T) {
	old := dbLog.Load()
	defer func() {
		if old != nil {
			dbLog.Store(old)
		}
	}()
	var buf syncbuf.Buffer // a node left by an earlier test may still log
	l := zerolog.New(&buf).Level(zerolog.InfoLevel)
	dbLog.Store(&l)
	a := dbLogAdapter{pkg: "raft"}
	a.Warningf("StaleRead called, linearizability not guaranteed for stale read")
	a.Infof("[%05d] replica started", 1)
	a.Warningf("%s has lost quorum", "[00001:00001]")
	a.Errorf("failed to connect to %s", "10.0.0.2:7848")
	out := buf.String()
	if strings.Contains(out, "StaleRead") || strings.Contains(out, "replica started") {
		t.Errorf("routine messages logged at info:\n%s", out)
	}
	if !strings.Contains(out, `"level":"warn","pkg":"raft","message":"[00001:00001] has lost quorum"`) ||
		!strings.Contains(out, `"level":"error","pkg":"raft","message":"failed to connect to 10.0.0.2:7848"`) {
		t.Errorf("actionable messages missing:\n%s", out)
	}
	defer func() {
		if recover() == nil {
			t.Error("Panicf returned")
		}
	}()
	a.Panicf("boom %d", 1)
}
