//go:build testhooks

package storage

import "sync/atomic"

// TEST ONLY, and only in a build with -tags testhooks: a failpoint in the
// write path for the chaos suite (interop/chaos). A release build compiles
// nofailpoint.go instead, where the failpoint is a constant no-op, so
// Batch.Commit carries no check at all; nacos-lockd installs one only when
// built with the tag and started with --test-hooks.

// failpointsBuilt says whether this build can install a failpoint.
const failpointsBuilt = true

var testFailpoint atomic.Pointer[func() error]

// SetTestFailpoint installs f, called at the start of every Batch.Commit:
// it may sleep (a slow disk) or return an error, which the commit returns
// without writing anything (a failed disk). nil removes it. Test only.
func SetTestFailpoint(f func() error) {
	if f == nil {
		testFailpoint.Store(nil)
		return
	}
	testFailpoint.Store(&f)
}

// failpoint runs the installed test failpoint, if any.
func failpoint() error {
	if f := testFailpoint.Load(); f != nil {
		return (*f)()
	}
	return nil
}
