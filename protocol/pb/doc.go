// Package pb is the generated code for nacos_grpc_service.proto: the Payload
// and Metadata messages and the Request and BiRequestStream services. Only
// this file is hand-written; regenerate the rest with protocol/gen.sh.
package pb
