package replica

import "testing"

// The link names reach dragonboat's variables: before this package's init
// they held the sizes dragonboat's own init set from its soft settings
// (512 and 96), not the zeros of variables of our own.
func TestEntrySliceSizesReachDragonboat(t *testing.T) {
	if foundEntrySliceSizes != [2]uint64{512, 96} {
		t.Fatalf("found entry slice sizes %v, want dragonboat's 512 and 96: the link names no longer reach its variables", foundEntrySliceSizes)
	}
}
