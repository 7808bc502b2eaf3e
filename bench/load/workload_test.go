package load

import (
	"testing"
	"time"
)

func TestFIFOViolations(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	tests := []struct {
		name   string
		grants []Grant
		want   int64
	}{
		{"empty", nil, 0},
		{"in order", []Grant{
			{Sent: at(0), Replied: at(1), Token: 10},
			{Sent: at(2), Replied: at(3), Token: 11},
			{Sent: at(4), Replied: at(5), Token: 12},
		}, 0},
		// Overlapping requests prove no order: either grant order is fine.
		{"overlap either way", []Grant{
			{Sent: at(0), Replied: at(5), Token: 12},
			{Sent: at(1), Replied: at(4), Token: 11},
		}, 0},
		// B was queued (answered at 1) before A asked (at 2), yet A got the
		// lock first: A's grant is a violation.
		{"barged", []Grant{
			{Sent: at(0), Replied: at(1), Token: 20}, // B
			{Sent: at(2), Replied: at(3), Token: 15}, // A
		}, 1},
		{"two overtaken by one", []Grant{
			{Sent: at(0), Replied: at(1), Token: 30},
			{Sent: at(2), Replied: at(3), Token: 10},
			{Sent: at(4), Replied: at(5), Token: 11},
		}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FIFOViolations(tt.grants); got != tt.want {
				t.Errorf("FIFOViolations = %d, want %d", got, tt.want)
			}
		})
	}
}
