//go:build !testhooks

package storage

// A release build has no storage failpoint (testfailpoint.go, -tags
// testhooks, has the chaos suite's): failpointsBuilt is a constant false, so
// the compiler drops the check in Batch.Commit along with this function.

const failpointsBuilt = false

func failpoint() error { return nil }
