package statemachine

import (
	"bytes"
	"testing"
)

// The gateway pushes to the waiter NextGrant names while the release
// commits, so the hint must name exactly the waiter that the release,
// applied next at the table clock, hands the lock to, and nobody when the
// release hands it to nobody. (A release stamped later than the table
// clock may outlive a waiter's deadline; then the hint is only a hint.)
func TestNextGrantNamesTheWaiterTheReleaseGrants(t *testing.T) {
	checked, found := 0, 0
	for seed := uint64(1); seed <= 12; seed++ {
		tb := NewTable()
		for i, c := range randomCommands(seed, 300) {
			idx := uint64(i + 1)
			tb.Apply(idx, c)
			tb.DiscardChanges()
			tb.TakeNotifications()
			for _, key := range []string{"a", "b", "c"} {
				for _, kind := range []Kind{KindNacosLock, KindReentrant, KindNonReentrant} {
					l := tb.Lock(kind, key)
					if !l.Found || l.Owner == "" {
						continue
					}
					hint := tb.NextGrant(kind, key, l.Owner)
					// Apply the release to a copy, at the table clock.
					cp := copyTable(t, tb)
					res := cp.Apply(idx+1, rel(kind, key, l.Owner, l.Clock))
					notes := cp.TakeNotifications()
					checked++
					switch {
					case hint.Found:
						found++
						if !res.Success() || len(notes) != 1 || notes[0].Owner != hint.Owner || notes[0].ConnID != hint.ConnID {
							t.Fatalf("seed %d step %d: hint %+v, release %+v notified %+v", seed, i+1, hint, res, notes)
						}
					case len(notes) != 0 && res.Success() && res.Count == 0:
						t.Fatalf("seed %d step %d: no hint, but the release handed the lock on: %+v", seed, i+1, notes)
					}
				}
			}
		}
	}
	if found == 0 || checked == found {
		t.Fatalf("the streams exercised nothing: %d releases checked, %d hand-offs", checked, found)
	}
}

// copyTable returns an independent table in the same state, through a
// snapshot round trip.
func copyTable(t *testing.T, tb *Table) *Table {
	t.Helper()
	cp, err := readSnapshot(bytes.NewReader(tb.StateBytes()))
	if err != nil {
		t.Fatal(err)
	}
	return cp
}
