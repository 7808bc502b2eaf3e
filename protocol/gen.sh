#!/usr/bin/env bash
# Regenerates protocol/pb from protocol/nacos_grpc_service.proto.
#
# Every tool is pinned, so the output is byte-for-byte reproducible: protoc
# and the well-known .proto files come from Maven Central (checked against
# the SHA-256 below), the two Go plugins from the Go module proxy. Nothing is
# installed globally; tools are cached under $NACOS_LOCKD_TOOLS (default
# ~/.cache/nacos-lockd/tools). Needs only bash, Go and network access on the
# first run. To bump a version, change it here, update its digest, rerun,
# and commit the regenerated files together with this script
# (protocol/pb/names_test.go checks that the file headers match the pins).
set -euo pipefail

PROTOC_VERSION=4.36.2 # com.google.protobuf:protoc, reports "libprotoc 36.2"
PROTOC_SHA256_LINUX_X86_64=f6ee22d65361338459208da8bff801c9ca689741cba9187b34990dd45198f864
# protoc's exe carries no well-known types; the protobuf-java jar of the same
# release ships google/protobuf/*.proto as resources.
PROTOBUF_JAVA_SHA256=0773e72eaf375e1285df330575bfec5bda5da674d544d0e142a17f89c8f754da
PROTOC_GEN_GO_VERSION=v1.36.12     # google.golang.org/protobuf, as in go.mod
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2  # google.golang.org/grpc/cmd/protoc-gen-go-grpc

MAVEN=${MAVEN_REPO:-https://repo.maven.apache.org/maven2}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tools=${NACOS_LOCKD_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/nacos-lockd/tools}

case "$(uname -s)-$(uname -m)" in
Linux-x86_64) classifier=linux-x86_64 protoc_sha=$PROTOC_SHA256_LINUX_X86_64 ;;
*)
	# Maven Central has builds for other platforms; pin their digests here
	# when someone needs them.
	echo "gen.sh: no pinned protoc for $(uname -s)-$(uname -m)" >&2
	exit 1
	;;
esac

# GOFLAGS cleared so a caller's -mod=vendor or the like cannot break the build.
gentool() { (cd "$here" && GOWORK=off GOFLAGS= go run ./internal/gentool "$@"); }

protoc_dir=$tools/protoc-$PROTOC_VERSION
protoc=$protoc_dir/protoc
gentool fetch -exec -sha256 "$protoc_sha" -out "$protoc" \
	-url "$MAVEN/com/google/protobuf/protoc/$PROTOC_VERSION/protoc-$PROTOC_VERSION-$classifier.exe"
jar=$protoc_dir/protobuf-java-$PROTOC_VERSION.jar
gentool fetch -sha256 "$PROTOBUF_JAVA_SHA256" -out "$jar" \
	-url "$MAVEN/com/google/protobuf/protobuf-java/$PROTOC_VERSION/protobuf-java-$PROTOC_VERSION.jar"
include=$protoc_dir/include
gentool unzip -zip "$jar" -entry google/protobuf/any.proto -dir "$include"

# install_plugin MODULE_PATH@VERSION MODULE VERSION: go install into a
# directory of its own, skipped when the binary there was built from the
# pinned module version.
bin=$tools/go-plugins/protobuf-$PROTOC_GEN_GO_VERSION-grpc-$PROTOC_GEN_GO_GRPC_VERSION
install_plugin() {
	local pkg=$1 mod=$2 ver=$3 name
	name=$(basename "$pkg")
	if [[ -x $bin/$name ]] && go version -m "$bin/$name" | grep -Eq "^[[:space:]]+mod[[:space:]]+$mod[[:space:]]+$ver([[:space:]]|$)"; then
		return
	fi
	# Outside any module and with GOFLAGS cleared, so neither our go.mod nor
	# the caller's settings can change what gets built.
	(cd "$tools" && GOWORK=off GOFLAGS= GOBIN=$bin go install "$pkg@$ver")
}
mkdir -p "$bin"
install_plugin google.golang.org/protobuf/cmd/protoc-gen-go google.golang.org/protobuf "$PROTOC_GEN_GO_VERSION"
install_plugin google.golang.org/grpc/cmd/protoc-gen-go-grpc google.golang.org/grpc/cmd/protoc-gen-go-grpc "$PROTOC_GEN_GO_GRPC_VERSION"

want="libprotoc ${PROTOC_VERSION#*.}"
if [[ "$("$protoc" --version)" != "$want" ]]; then
	echo "gen.sh: $protoc is not $want" >&2
	exit 1
fi

# Generate into a scratch directory, then replace the checked-in files, so a
# failed run leaves protocol/pb untouched.
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# Run from protocol/ with a relative file name: protoc-gen-go records it as
# the "source:" line, which must not depend on where the repo is checked out.
(cd "$here" && "$protoc" \
	-I . -I "$include" \
	--plugin=protoc-gen-go="$bin/protoc-gen-go" \
	--plugin=protoc-gen-go-grpc="$bin/protoc-gen-go-grpc" \
	--go_out="$out" --go_opt=paths=source_relative \
	--go-grpc_out="$out" --go-grpc_opt=paths=source_relative \
	nacos_grpc_service.proto)

mkdir -p "$here/pb"
rm -f "$here"/pb/*.pb.go
cp "$out"/*.pb.go "$here/pb/"
echo "gen.sh: wrote $(cd "$here/pb" && ls ./*.pb.go | tr '\n' ' ')"
