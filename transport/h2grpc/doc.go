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
// fit for production, and the default (--transport h2; grpc-go's server
// stays as --transport grpc): what grpc-java, grpc-go and nacos-sdk-go
// clients need and nothing more.
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
//   - a keepalive goroutine pings an idle peer and closes a dead one;
//   - PING ACKs wait for the next response and go out behind it, in its
//     write: grpc clients ping after every response they receive (to size
//     their windows), and an ACK written at once costs a write of its own
//     whenever no call is in flight, and brings the next ping at once. A
//     client that sees the ACK after the response's DATA pings only after
//     the next one: half the pings, and one write per call (2026-12-02,
//     calls 1 ms apart from a grpc-go client: 1 write per call, from 2).
//     One sweeper goroutine per server, running only while some
//     connection holds an ACK, sends those no response has carried within
//     ackHold (100 ms): no timer per ping (a timer re-armed on every ping
//     cost more at 64 clients than the writes it saved).
//
// Limits against peers that make the server work for nothing. Streams
// count against MaxConcurrentStreams until their handlers return, so
// resetting them frees no slot (rapid reset); one past the limit is
// refused with REFUSED_STREAM. The others end the connection with GOAWAY
// ENHANCE_YOUR_CALM and a warn line saying which: more than 100 SETTINGS
// frames between two new streams; a third ping closer than
// MinPingInterval to the one before (grpc-go's ping strikes); a header
// block of more than 64 frames or twice MaxHeaderListSize. And frames
// that carry nothing are counted, per kind, since the client last sent
// something useful (a new stream, or data for an open one): 16 empty
// DATA frames (no payload, no END_STREAM; padding-only ones too); 100
// PRIORITY, unknown-type, repeated GOAWAY or malformed control frames
// and header blocks on ended streams; 16 PING or SETTINGS ACKs for
// nothing the server sent; 100 WINDOW_UPDATE frames with no DATA sent
// since the last one. grpc-go and grpc-java clients send none of the
// first three kinds, and a WINDOW_UPDATE or two per DATA frame they
// receive.
// RST_STREAM and WINDOW_UPDATE on a stream the client never opened are
// PROTOCOL_ERROR, as RFC 9113 section 5.1 says.
//
// The transport keeps no metrics of its own: Config.ConnError reports each
// connection closed because of the client (the gateway counts them).
//
// Request headers are checked as RFC 9113 section 8.2-8.3 asks: lowercase field
// names without control characters, spaces or colons; values without NUL,
// CR or LF and without leading or trailing whitespace; no
// connection-specific fields (connection, keep-alive, proxy-connection,
// transfer-encoding, upgrade; te only as "trailers"); exactly the request
// pseudo-header fields, each at most once, before every regular field,
// with :method, :scheme and a non-empty :path present. A request that
// fails is an error of its stream only (RST_STREAM PROTOCOL_ERROR); the
// connection goes on. Request trailers (gRPC clients send none) must end
// the stream and carry no pseudo-header field; they are otherwise
// ignored. content-length is not checked: gRPC's own framing delimits
// the messages.
//
// A handler's context is what grpc-go's server gives: the peer, the
// deadline, cancellation, the incoming metadata (metadata.FromIncomingContext:
// the same fields grpc-go keeps, -bin values decoded; a value that is not
// base64 fails the call with INTERNAL, as on grpc-go) and a
// grpc.ServerTransportStream (grpc.Method works). The gateway reads only
// the peer, so the metadata is kept as the request's fields in the stream
// and built only when asked for: a call costs no allocation for it
// (unless it carries more than six such fields). The deadline is the
// client's grpc-timeout, or Config.MaxCallDuration if that is sooner (the
// gateway sets it to its lock request timeout, so a lock call needs no
// timeout context of its own). The context is the stream's own
// (calllife.go), not a context.WithTimeout: the call, its client's
// RST_STREAM and its connection's close end it, and one timer per
// connection, set for the earliest deadline among its calls, ends those
// whose deadline passes.
//
// Messages are decoded by hand (payload.go): the one message type, Payload,
// read as protobuf-go reads proto3 (FuzzPayloadDecode holds the two to the
// same result), without its reflection; responses are encoded by
// proto.Marshal.
//
// Response metadata is not carried (the gateway sets none): grpc.SetHeader,
// grpc.SendHeader and grpc.SetTrailer, and the stream's SetHeader and
// SendHeader, return an Unimplemented error when given metadata (none is
// no error); the stream's SetTrailer, which returns nothing, drops it.
//
// What it deliberately does not do: compression (refused with
// UNIMPLEMENTED), response metadata (above), server-initiated streams,
// HTTP/1.1, priorities, and any method other than the two above
// (UNIMPLEMENTED).
package h2grpc
