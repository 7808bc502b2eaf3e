// Package h2grpc is a lean gRPC server over HTTP/2 for exactly the two
// methods the gateway serves: the unary /Request/request and the
// bidirectional /BiRequestStream/requestBiStream of protocol/pb.
//
// Why it exists: issue 13 asks for the server's CPU per lock operation to
// come down to 1.25x an empty grpc-go handler, and profiles put a large
// share of it in grpc-go's server transport (the per-connection loopy
// writer, the control buffer, the hand-off of every frame between the
// reader, the handler and the writer goroutine). The measuring server in
// cmd/nacos-lock-bench (h2lite) showed what a lean transport saves: 0.75x
// grpc-go's CPU per call at 64 clients. This package is that design made
// fit for production behind a flag (--transport h2): what grpc-java,
// grpc-go and nacos-sdk-go clients need and nothing more.
//
// Design, per connection:
//   - one reader goroutine reads frames (x/net/http2's Framer and hpack
//     do the wire format; the protocol logic is ours), answers control
//     frames and assembles request messages;
//   - each call runs on a handler goroutine (a pool of long-lived workers,
//     so the deep lock path does not regrow a fresh stack per call), which
//     writes its whole response (headers, message, trailers) under the
//     connection's write lock and flushes it: one write syscall per
//     response and no writer goroutine to hand frames to;
//   - a keepalive goroutine pings an idle peer and closes a dead one.
//
// What it deliberately does not do: compression (refused with
// UNIMPLEMENTED), request metadata in the context (the gateway reads
// none), server-initiated streams, HTTP/1.1, priorities, and any method
// other than the two above (UNIMPLEMENTED).
package h2grpc
