package statemachine

// The writer's side of grouped entries (batch.go): which queued commands
// may share the next entry, and its frame. Group commit (replica) applies
// these rules to its queue; the tests here apply them to random streams, so
// the rules that keep tokens fenced are checked where the table is.

// TakeEntry splits the next entry's commands off the front of a queue:
// everything in order up to MaxBatch, except that
//   - a command that touches more than one lock (CLEANUP_CONNECTION,
//     FORCE_RELEASE) goes alone;
//   - each lock gets at most one ACQUIRE, placed after the lock's other
//     commands (frame version 5): a second ACQUIRE for the lock, or a
//     command from the same owner or connection as that ACQUIRE, waits for
//     the next entry, and so does every later command for that lock from
//     the same owner or connection as a command that waits.
//
// Moving an ACQUIRE behind later commands of other clients, or a command
// ahead of another client's command that waits, is a serialisation they
// cannot tell apart: none of them has been answered. (A hand-off queues
// the previous holders' ACQUIREs while the new holder claims and
// releases; the release must not wait behind the second of them, or the
// hand-off costs two entries.)
// cmd reads an element's command; drop is asked about each element looked
// at and leaves out those it reports (a caller's deadline passed). rest is
// what stays queued, in order. entry is never empty while the queue holds
// an element drop keeps.
func TakeEntry[T any](queue []T, cmd func(T) *Command, drop func(T) bool) (entry, rest []T) {
	var batch, acquires []T
	i := 0
	for ; i < len(queue); i++ {
		p := queue[i]
		if drop(p) {
			continue
		}
		c := cmd(p)
		if !Groupable(c.Op) {
			if len(batch) == 0 && len(acquires) == 0 && len(rest) == 0 {
				batch = append(batch, p)
				i++
			}
			break
		}
		if len(batch)+len(acquires) == MaxBatch {
			break
		}
		if len(batch) > 0 && !Groupable(cmd(batch[0]).Op) {
			break
		}
		if callerWaits(rest, cmd, c) {
			rest = append(rest, p)
			continue
		}
		if a := lockCmd(acquires, cmd, c); a != nil {
			if c.Op == OpAcquire || sameCaller(a, c) {
				rest = append(rest, p)
				continue
			}
		}
		if c.Op == OpAcquire {
			acquires = append(acquires, p)
		} else {
			batch = append(batch, p)
		}
	}
	return append(batch, acquires...), append(rest, queue[i:]...)
}

// EncodeEntry encodes the commands TakeEntry took as one log entry: a lone
// command in its plain encoding (cheaper, and readable by every build),
// else a frame of version 5 when a lock has more than one command in it,
// else 4, which older builds read.
func EncodeEntry[T any](entry []T, cmd func(T) *Command) []byte {
	if len(entry) == 1 {
		return cmd(entry[0]).Encode()
	}
	cmds := make([][]byte, len(entry))
	version := byte(CommandBatchVersion)
	for i, p := range entry {
		c := cmd(p)
		cmds[i] = c.Encode()
		if hasLock(entry[i+1:], cmd, c) {
			version = SharedLockBatchVersion
		}
	}
	return EncodeBatch(version, cmds)
}

// lockCmd returns the first command in cmds for c's lock, if any.
func lockCmd[T any](cmds []T, cmd func(T) *Command, c *Command) *Command {
	for _, p := range cmds {
		if o := cmd(p); SameLock(*o, *c) {
			return o
		}
	}
	return nil
}

func hasLock[T any](cmds []T, cmd func(T) *Command, c *Command) bool {
	return lockCmd(cmds, cmd, c) != nil
}

// callerWaits reports whether cmds holds a command for c's lock from c's
// owner or connection: c must then wait behind it.
func callerWaits[T any](cmds []T, cmd func(T) *Command, c *Command) bool {
	for _, p := range cmds {
		if o := cmd(p); SameLock(*o, *c) && sameCaller(o, c) {
			return true
		}
	}
	return false
}

// SameLock reports whether two commands touch the same lock.
func SameLock(a, b Command) bool { return a.Kind == b.Kind && a.Key == b.Key }

// sameCaller reports whether two commands may come from one client, whose
// own order must be kept.
func sameCaller(a, b *Command) bool {
	return a.Owner == b.Owner || (a.ConnID != "" && a.ConnID == b.ConnID)
}
