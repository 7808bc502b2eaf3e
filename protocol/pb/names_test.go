package pb_test

import (
	"os"
	"regexp"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/reflect/protoreflect"

	"nacos-lockd/protocol/pb"
)

// The Java client dials these exact paths; they only come out unqualified
// because the .proto has no package line.
func TestMethodPaths(t *testing.T) {
	if got, want := pb.Request_Request_FullMethodName, "/Request/request"; got != want {
		t.Errorf("unary method = %q, want %q", got, want)
	}
	if got, want := pb.BiRequestStream_RequestBiStream_FullMethodName, "/BiRequestStream/requestBiStream"; got != want {
		t.Errorf("stream method = %q, want %q", got, want)
	}
	checkService(t, pb.Request_ServiceDesc, "Request", "request", false)
	checkService(t, pb.BiRequestStream_ServiceDesc, "BiRequestStream", "requestBiStream", true)
}

func checkService(t *testing.T, sd grpc.ServiceDesc, service, method string, stream bool) {
	t.Helper()
	if sd.ServiceName != service {
		t.Errorf("service name = %q, want %q", sd.ServiceName, service)
	}
	switch {
	case !stream && (len(sd.Methods) != 1 || len(sd.Streams) != 0 || sd.Methods[0].MethodName != method):
		t.Errorf("%s: want one unary method %q, got %+v / %+v", service, method, sd.Methods, sd.Streams)
	case stream && (len(sd.Methods) != 0 || len(sd.Streams) != 1 || sd.Streams[0].StreamName != method ||
		!sd.Streams[0].ClientStreams || !sd.Streams[0].ServerStreams):
		t.Errorf("%s: want one bidi stream %q, got %+v / %+v", service, method, sd.Methods, sd.Streams)
	}
}

// Field names and numbers are the wire contract with the Java SDK.
func TestMessageDescriptors(t *testing.T) {
	payload := (&pb.Payload{}).ProtoReflect().Descriptor()
	metadata := (&pb.Metadata{}).ProtoReflect().Descriptor()
	if payload.FullName() != "Payload" || metadata.FullName() != "Metadata" {
		t.Errorf("full names = %q, %q; want Payload, Metadata", payload.FullName(), metadata.FullName())
	}
	if f := payload.ParentFile(); f.Package() != "" || f.Path() != "nacos_grpc_service.proto" {
		t.Errorf("file %q package %q, want nacos_grpc_service.proto without package", f.Path(), f.Package())
	}
	checkFields(t, metadata, map[string]protoreflect.FieldNumber{"type": 3, "clientIp": 8, "headers": 7})
	checkFields(t, payload, map[string]protoreflect.FieldNumber{"metadata": 2, "body": 3})
	if h := metadata.Fields().ByName("headers"); !h.IsMap() || h.MapKey().Kind() != protoreflect.StringKind || h.MapValue().Kind() != protoreflect.StringKind {
		t.Error("Metadata.headers is not map<string,string>")
	}
	if b := payload.Fields().ByName("body"); b.Message() == nil || b.Message().FullName() != "google.protobuf.Any" {
		t.Error("Payload.body is not google.protobuf.Any")
	}
}

func checkFields(t *testing.T, md protoreflect.MessageDescriptor, want map[string]protoreflect.FieldNumber) {
	t.Helper()
	if md.Fields().Len() != len(want) {
		t.Errorf("%s has %d fields, want %d", md.FullName(), md.Fields().Len(), len(want))
	}
	for name, num := range want {
		f := md.Fields().ByName(protoreflect.Name(name))
		if f == nil || f.Number() != num {
			t.Errorf("%s.%s: want field number %d, got %v", md.FullName(), name, num, f)
		}
	}
}

// TestGeneratedByPinnedTools catches a version bump in gen.sh that was not
// followed by regenerating.
func TestGeneratedByPinnedTools(t *testing.T) {
	script := readFile(t, "../gen.sh")
	pin := func(name string) string {
		m := regexp.MustCompile(`(?m)^` + name + `=(\S+)`).FindSubmatch(script)
		if m == nil {
			t.Fatalf("gen.sh has no %s", name)
		}
		return string(m[1])
	}
	protoc := regexp.MustCompile(`^\d+\.`).ReplaceAllString(pin("PROTOC_VERSION"), "") // 4.36.2 -> 36.2
	checks := []struct {
		file string
		re   string
	}{
		{"nacos_grpc_service.pb.go", `(?m)^// \tprotoc-gen-go ` + regexp.QuoteMeta(pin("PROTOC_GEN_GO_VERSION")) + `$`},
		{"nacos_grpc_service.pb.go", `(?m)^// \tprotoc +v\d+\.` + regexp.QuoteMeta(protoc) + `$`},
		{"nacos_grpc_service_grpc.pb.go", `(?m)^// - protoc-gen-go-grpc ` + regexp.QuoteMeta(pin("PROTOC_GEN_GO_GRPC_VERSION")) + `$`},
		{"nacos_grpc_service_grpc.pb.go", `(?m)^// - protoc +v\d+\.` + regexp.QuoteMeta(protoc) + `$`},
	}
	for _, c := range checks {
		if !regexp.MustCompile(c.re).Match(readFile(t, c.file)) {
			t.Errorf("%s: no header line matching %q; run ./protocol/gen.sh", c.file, c.re)
		}
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
