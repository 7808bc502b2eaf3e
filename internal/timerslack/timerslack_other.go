//go:build !linux

package timerslack

import (
	"errors"
	"time"
)

func current() (time.Duration, error) { return 0, errors.ErrUnsupported }

// ensure does nothing: the knob is Linux's.
func ensure(time.Duration) error { return nil }

func ofThreads(int) ([]time.Duration, error) { return nil, errors.ErrUnsupported }
