package replica

import (
	"context"
	"fmt"

	"github.com/lni/dragonboat/v4"
)

// SealInstalledState makes a table installed with InstallFresh (an import,
// a restore) part of the shard's Raft history. Such a table is in storage
// but in no log entry: a replica that later joins and catches up by
// replaying the log from its start would never see it, and would diverge
// (tests show it: the joiner lacks every installed lock). SealInstalledState
// takes a snapshot and compacts the whole log behind it, so any replica
// that needs history from before it receives the snapshot, which carries
// the installed table.
//
// Call it once on the node started on the installed data dir, after
// WaitReady and before other replicas join. It is harmless at any other
// time: it costs one snapshot.
func (n *Node) SealInstalledState(ctx context.Context) error {
	if n.solo != nil {
		return nil // no replica ever joins, and the table is in storage
	}
	_, err := n.nh.SyncRequestSnapshot(ctx, n.cfg.ShardID, dragonboat.SnapshotOption{
		OverrideCompactionOverhead: true,
		CompactionOverhead:         0,
	})
	if err != nil {
		return fmt.Errorf("snapshot installed lock table: %w: %w", ErrUnavailable, err)
	}
	return nil
}
