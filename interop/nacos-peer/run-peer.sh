#!/usr/bin/env bash
# Starts the Nacos 3.1.0 peer (pig-mesh rebuild) in the foreground: standalone, loopback only,
# auth off, a throw-away home. Usage: run-peer.sh MAIN_PORT HOME_DIR [key=value ...]
# (extra key=value pairs are appended to its application.properties)
# gRPC SDK port = MAIN_PORT+1000, JRaft = MAIN_PORT-1000. Build it first:
#   mvn -B -f interop/nacos-peer/pom.xml package
# NACOS_PEER_JIT_OPTS: the JVM's JIT flags; by default C1 only (-XX:TieredStopAtLevel=1), which
# starts fastest for the differential tests. The benchmark sets it empty: the JVM's full tiered
# JIT, as Nacos's own start-up script runs it, so Nacos is measured with its code fully compiled.
set -euo pipefail
cd "$(dirname "$0")"
port=${1:-18848}
home=${2:-$(mktemp -d /tmp/nacos-peer.XXXXXX)}
mkdir -p "$home/conf" "$home/logs" "$home/data"
# >= 32 bytes, base64: the server refuses to start without it even with auth off
secret=$(printf 'nacos-lockd-differential-peer-secret-key-32+bytes' | base64 -w0)
cat > "$home/conf/application.properties" <<PROPS
nacos.standalone=true
nacos.deployment.type=server
server.port=$port
nacos.server.main.port=$port
server.address=127.0.0.1
server.servlet.contextPath=/nacos
nacos.inetutils.ip-address=127.0.0.1
nacos.inetutils.prefer-hostname-over-ip=false
nacos.core.auth.enabled=false
nacos.core.auth.admin.enabled=false
nacos.core.auth.console.enabled=false
nacos.core.auth.system.type=nacos
nacos.core.auth.plugin.nacos.token.secret.key=$secret
nacos.core.auth.plugin.nacos.token.expire.seconds=18000
nacos.core.auth.server.identity.key=nacos-lockd-peer
nacos.core.auth.server.identity.value=nacos-lockd-peer
spring.sql.init.platform=
nacos.istio.mcp.server.enabled=false
nacos.extension.naming.istio.enabled=false
nacos.k8s.sync.enabled=false
nacos.ai.mcp.registry.enabled=false
nacos.plugin.ai.enabled=false
management.endpoints.web.exposure.include=
spring.jmx.enabled=false
nacos.naming.empty-service.auto-clean=false
PROPS
shift 2 || true
for kv in "$@"; do printf '%s\n' "$kv" >> "$home/conf/application.properties"; done
# shellcheck disable=SC2086 # the flags are words
exec java -Xms256m -Xmx512m -XX:+UseSerialGC ${NACOS_PEER_JIT_OPTS--XX:TieredStopAtLevel=1} -Djava.net.preferIPv4Stack=true \
  -cp "target/classes:$(cat target/peer.classpath)" \
  -Dnacos.standalone=true -Dnacos.deployment.type=server \
  -Dnacos.home="$home" -Dnacos.logs.path="$home/logs" -DJM.LOG.PATH="$home/logs" -DJM.SNAPSHOT.PATH="$home" \
  -Duser.home="$home" -Dspring.config.additional-location="file:$home/conf/" -Dderby.stream.error.file="$home/derby.log" \
  nacoslockd.peer.NacosPeer
