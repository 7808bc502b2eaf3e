package storage

import (
	"strings"

	"github.com/rs/zerolog"
)

// badgerLogger adapts zerolog to badger.Logger. Badger logs lifecycle chatter
// (table flushes, compactions, replay progress) at info, which is detail for
// us, so info and debug both become debug; warnings and errors keep their
// level. Msgf formats only when the level is enabled.
type badgerLogger struct {
	log zerolog.Logger
}

func (l badgerLogger) Errorf(format string, args ...any) {
	l.log.Error().Msgf(trimNewline(format), args...)
}

func (l badgerLogger) Warningf(format string, args ...any) {
	l.log.Warn().Msgf(trimNewline(format), args...)
}

func (l badgerLogger) Infof(format string, args ...any) {
	l.log.Debug().Msgf(trimNewline(format), args...)
}

func (l badgerLogger) Debugf(format string, args ...any) {
	l.log.Debug().Msgf(trimNewline(format), args...)
}

// trimNewline drops the newline many badger formats end with; zerolog ends
// each event itself.
func trimNewline(format string) string {
	return strings.TrimRight(format, "\n")
}
