package storage

import "sync/atomic"

// TEST ONLY. A failpoint in the write path for the chaos suite
// (interop/chaos): nacos-lockd installs one only when started with
// --test-hooks, so production never has one.

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
