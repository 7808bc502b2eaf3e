package replica

import (
	"strings"

	dblogger "github.com/lni/dragonboat/v4/logger"
	"github.com/rs/zerolog"
)

// dragonboat logs its routine workings as warnings: every election step
// ("became PreVote candidate", "cast vote"), every stale read we make on
// purpose ("StaleRead called, linearizability not guaranteed"), timer
// batching ("had %d LocalTick msgs in one batch"), and "mutual TLS disabled"
// on every start although our SDK and main ports carry their own TLS. An
// operator reads a warning in a lock server's log as an alarm, so only the
// warnings that need someone to act stay visible at the default info level;
// the rest go to debug, its info notes to debug and its debug to trace.
// Leader changes reach the log at info through leaderLogger.

// dragonboatActionable are substrings of the format strings of the
// dragonboat warnings that point at something to fix: a lost quorum or an
// unreachable peer, members of different clusters or builds talking to
// each other, a failing snapshot transfer, overload.
var dragonboatActionable = []string{
	"has lost quorum",
	"became unreachable",
	"binary compatibility version not match",
	"deployment id does not match",
	"unsupported OS/ARCH",
	"ElectionRTT is not a magnitude larger",
	"evicted, overloaded",
	"rate limited dropped",
	"job count is rate limited",
	"stream snapshot to %s failed",
	"processSnapshot failed",
	"snapshot failed, %s is now in wait state",
	"memfs test mode",
}

// dragonboatLevel is the level a dragonboat message is logged at. format
// is the message's format string, which (unlike the formatted message)
// is a constant of dragonboat's source.
func dragonboatLevel(l dblogger.LogLevel, format string) zerolog.Level {
	switch l {
	case dblogger.CRITICAL:
		return zerolog.PanicLevel
	case dblogger.ERROR:
		return zerolog.ErrorLevel
	case dblogger.WARNING:
		for _, s := range dragonboatActionable {
			if strings.Contains(format, s) {
				return zerolog.WarnLevel
			}
		}
		return zerolog.DebugLevel
	case dblogger.INFO:
		return zerolog.DebugLevel
	default:
		return zerolog.TraceLevel
	}
}

// logf writes one dragonboat message at the level dragonboatLevel gives it.
// Panicf must not return (dragonboat's code after it assumes so), and
// WithLevel never panics, so CRITICAL goes through Panic.
func (a dbLogAdapter) logf(l dblogger.LogLevel, format string, args []any) {
	e := a.l().WithLevel(dragonboatLevel(l, format))
	if l == dblogger.CRITICAL {
		e = a.l().Panic()
	}
	e.Str("pkg", a.pkg).Msgf(format, args...)
}
