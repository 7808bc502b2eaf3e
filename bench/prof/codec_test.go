package prof

import (
	"testing"

	"nacos-lockd/interop/client"
	"nacos-lockd/protocol"
)

// BenchmarkDecodeLockRequest is the gateway's first step for every lock
// call: the JSON body of a typical ACQUIRE into protocol types.
func BenchmarkDecodeLockRequest(b *testing.B) {
	li := typicalAcquire()
	p, err := protocol.EncodeWith(&protocol.LockOperationRequest{LockInstance: &li, LockOperationEnum: protocol.OpAcquire}, "127.0.0.1", nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := protocol.Decode(p); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeLockReply is the last step: a granted ACQUIRE's reply.
func BenchmarkEncodeLockReply(b *testing.B) {
	r := protocol.NewLockOperationResponse(protocol.Success(), protocol.LockResult{Success: true, ReentrantCount: 1, WaitPosition: -1, FencingToken: 123456})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := protocol.Encode(r); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeLockRequest is a client's first step for every lock call:
// a typical ACQUIRE into its payload, with the Java client's metadata.
func BenchmarkEncodeLockRequest(b *testing.B) {
	li := typicalAcquire()
	r := &protocol.LockOperationRequest{LockInstance: &li, LockOperationEnum: protocol.OpAcquire}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := protocol.EncodeWith(r, "127.0.0.1", nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeLockReply is a client's last step: a granted ACQUIRE's
// reply.
func BenchmarkDecodeLockReply(b *testing.B) {
	p, err := protocol.Encode(protocol.NewLockOperationResponse(protocol.Success(), protocol.LockResult{Success: true, ReentrantCount: 1, WaitPosition: -1, FencingToken: 123456}))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := protocol.Decode(p); err != nil {
			b.Fatal(err)
		}
	}
}

// typicalAcquire is the lock instance of a W1 acquire.
func typicalAcquire() protocol.LockInstance {
	return client.Instance("bench-w1-1764492000000000000-12", "NON_REENTRANT", "bench-12-1764492000000000000", client.Ms(30000), client.Ms(-1))
}
