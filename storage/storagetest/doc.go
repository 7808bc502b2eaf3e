// Package storagetest provides storage helpers for other packages' tests.
// It imports testing, so only _test.go files may import it; storage itself
// stays free of testing.
package storagetest
