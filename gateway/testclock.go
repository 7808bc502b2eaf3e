package gateway

import "time"

// clockOrNow returns the clock the gateway stamps commands with: Config.Now
// when set (only the chaos suite's --test-hooks sets it, to inject clock
// offsets and jumps), else time.Now.
func clockOrNow(now func() time.Time) func() time.Time {
	if now != nil {
		return now
	}
	return time.Now
}
