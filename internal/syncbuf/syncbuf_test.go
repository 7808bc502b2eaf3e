package syncbuf

import (
	"strings"
	"sync"
	"testing"
)

// Writers on several goroutines and a reader beside them: every byte
// arrives (run under -race, which is where a missing lock shows).
func TestConcurrentWritesAndReads(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				_, _ = b.Write([]byte("x"))
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	if b.Len() != 800 || b.String() != strings.Repeat("x", 800) {
		t.Fatalf("got %d bytes", b.Len())
	}
}
