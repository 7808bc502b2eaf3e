package statemachine

import (
	"fmt"
	"testing"
)

// TakeEntry may reorder commands of different clients (none of them has
// been answered), and one client's commands for different locks (each lock
// is its own object, and linearizability is per object), but never two of
// one client's for one lock: a claim's record must commit before the
// release its client sent after the claim's answer. Every command leaves the
// queue exactly once, and each entry gives a lock at most one ACQUIRE,
// after the lock's other commands.
func TestTakeEntryKeepsEachCallersOrder(t *testing.T) {
	self := func(c *Command) *Command { return c }
	none := func(*Command) bool { return false }
	moved := 0
	for seed := uint64(1); seed <= 30; seed++ {
		cmds := randomCommands(seed, 400)
		for i := range cmds {
			cmds[i].Token = uint64(i) // names each command
			if cmds[i].Op == OpExpire {
				cmds[i].Op = OpRelease // EXPIRE's token is its own; keep names unique
			}
		}
		var queue []*Command
		var out []*Command
		for i := 0; i < len(cmds) || len(queue) > 0; {
			for ; len(queue) < 16 && i < len(cmds); i++ {
				queue = append(queue, &cmds[i])
			}
			var entry []*Command
			entry, queue = TakeEntry(queue, self, none)
			if len(entry) == 0 {
				t.Fatalf("seed %d: empty entry from a queue of %d", seed, len(queue))
			}
			for k, c := range entry {
				for _, d := range entry[k+1:] {
					if SameLock(*c, *d) && c.Op == OpAcquire {
						t.Fatalf("seed %d: %s %s#%d before %s#%d of its lock in one entry", seed, c.Key, c.Op, c.Token, d.Op, d.Token)
					}
				}
			}
			out = append(out, entry...)
		}
		if len(out) != len(cmds) {
			t.Fatalf("seed %d: %d commands in, %d out", seed, len(cmds), len(out))
		}
		for k := 1; k < len(out); k++ {
			if out[k].Token < out[k-1].Token {
				moved++
			}
		}
		for k, c := range out {
			for _, d := range out[k+1:] {
				if d.Token < c.Token && (SameLock(*c, *d) || !Groupable(c.Op) || !Groupable(d.Op)) && (d.Owner == c.Owner || d.ConnID == c.ConnID) {
					t.Fatalf("seed %d: %s by %s/%s (#%d) went out before %s by %s/%s (#%d), queued earlier",
						seed, c.Op, c.Owner, c.ConnID, c.Token, d.Op, d.Owner, d.ConnID, d.Token)
				}
			}
		}
		seen := map[uint64]bool{}
		for _, c := range out {
			if seen[c.Token] {
				t.Fatalf("seed %d: command #%d taken twice", seed, c.Token)
			}
			seen[c.Token] = true
		}
	}
	if moved == 0 {
		t.Fatal("no command was ever moved: the test proves little")
	}
	t.Log(fmt.Sprint(moved, " moves"))
}
