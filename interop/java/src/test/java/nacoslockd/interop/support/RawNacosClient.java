package nacoslockd.interop.support;

import com.alibaba.nacos.api.grpc.auto.BiRequestStreamGrpc;
import com.alibaba.nacos.api.grpc.auto.Metadata;
import com.alibaba.nacos.api.grpc.auto.Payload;
import com.alibaba.nacos.api.grpc.auto.RequestGrpc;
import com.alibaba.nacos.shaded.com.google.protobuf.Any;
import com.alibaba.nacos.shaded.com.google.protobuf.ByteString;
import com.alibaba.nacos.shaded.io.grpc.ManagedChannel;
import com.alibaba.nacos.shaded.io.grpc.ManagedChannelBuilder;
import com.alibaba.nacos.shaded.io.grpc.stub.StreamObserver;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * A Nacos gRPC connection built by hand from the pieces inside the nacos-client jar (its shaded
 * grpc-java stack and the generated {@code Payload}/{@code Request}/{@code BiRequestStream}
 * stubs), so a test sees the raw JSON of every reply, including fields the client's own
 * response classes drop (nacos-lockd's {@code lockResult.fencingToken}).
 *
 * <p>It does what the real client does on a new connection: unary {@code ServerCheckRequest},
 * bi-stream with one {@code ConnectionSetupRequest}, wait for {@code SetupAckRequest}; then
 * unary requests. Server pushes ({@code ConnectResetRequest}, {@code ClientDetectionRequest},
 * {@code LockNotificationRequest}) are answered on the stream like the Java client does and
 * queued for the test. One instance is one connection (one NACOS_LOCK owner).
 */
public final class RawNacosClient implements AutoCloseable {

    private static final ObjectMapper JSON = new ObjectMapper();

    private final ManagedChannel channel;

    private final RequestGrpc.RequestBlockingStub unary;

    private final String connectionId;

    private final Map<String, Boolean> abilities;

    private final StreamObserver<Payload> toServer;

    private final BlockingQueue<Reply> pushes = new LinkedBlockingQueue<>();

    /** One reply (or push): {@code metadata.type} and the parsed JSON body. */
    public record Reply(String type, JsonNode body) {

        public int resultCode() {
            return body.path("resultCode").asInt(-1);
        }

        public int errorCode() {
            return body.path("errorCode").asInt(-1);
        }

        /** {@code result}: Boolean, or null when absent. */
        public Boolean result() {
            JsonNode r = body.get("result");
            return r == null || r.isNull() ? null : r.asBoolean();
        }

        public String message() {
            JsonNode m = body.get("message");
            return m == null || m.isNull() ? null : m.asText();
        }

        public JsonNode lockResult() {
            return body.get("lockResult");
        }

        /** {@code lockResult.fencingToken}, or null when absent. */
        public Long fencingToken() {
            JsonNode lr = body.get("lockResult");
            if (lr == null || !lr.has("fencingToken") || lr.get("fencingToken").isNull()) {
                return null;
            }
            return lr.get("fencingToken").asLong();
        }

        @Override
        public String toString() {
            return type + " " + body;
        }
    }

    private RawNacosClient(ManagedChannel channel, String clientVersion, long timeoutMs) throws Exception {
        this.channel = channel;
        this.unary = RequestGrpc.newBlockingStub(channel);
        Reply check = request("ServerCheckRequest", JSON.createObjectNode(), timeoutMs);
        if (!"ServerCheckResponse".equals(check.type())) {
            throw new IllegalStateException("ServerCheck answered with " + check);
        }
        this.connectionId = check.body().path("connectionId").asText();
        CompletableFuture<Reply> ack = new CompletableFuture<>();
        this.toServer = BiRequestStreamGrpc.newStub(channel).requestBiStream(new StreamObserver<>() {
            @Override
            public void onNext(Payload p) {
                Reply push;
                try {
                    push = parse(p);
                } catch (Exception e) {
                    ack.completeExceptionally(e);
                    return;
                }
                if (!ack.isDone()) {
                    ack.complete(push);
                    return;
                }
                answer(push);
                pushes.add(push);
            }

            @Override
            public void onError(Throwable t) {
                ack.completeExceptionally(t);
                pushes.add(new Reply("(stream error)", JSON.createObjectNode().put("error", String.valueOf(t))));
            }

            @Override
            public void onCompleted() {
                pushes.add(new Reply("(stream completed)", JSON.createObjectNode()));
            }
        });
        ObjectNode setup = JSON.createObjectNode();
        setup.put("clientVersion", clientVersion);
        ObjectNode labels = setup.putObject("labels");
        labels.put("source", "sdk");
        labels.put("module", "lock");
        labels.put("AppName", "nacos-lockd-raw-java");
        labels.put("tls.enable", "false");
        ObjectNode abilityTable = setup.putObject("abilityTable");
        abilityTable.put("lock", true);
        setup.put("module", "internal");
        send("ConnectionSetupRequest", setup);
        Reply setupAck = ack.get(timeoutMs, TimeUnit.MILLISECONDS);
        if (!"SetupAckRequest".equals(setupAck.type())) {
            throw new IllegalStateException("first stream message is not SetupAckRequest: " + setupAck);
        }
        Map<String, Boolean> table = new LinkedHashMap<>();
        setupAck.body().path("abilityTable").fields().forEachRemaining(e -> table.put(e.getKey(), e.getValue().asBoolean()));
        this.abilities = table;
    }

    /** Connects to host:grpcPort (the SDK port, main + 1000) and completes the handshake. */
    public static RawNacosClient connect(String host, int grpcPort) throws Exception {
        String version = System.getProperty("nacos.client.version", "3.0.0");
        ManagedChannel ch = ManagedChannelBuilder.forAddress(host, grpcPort).usePlaintext().build();
        try {
            return new RawNacosClient(ch, "Nacos-Java-Client:v" + version, 5000);
        } catch (Exception e) {
            ch.shutdownNow();
            throw e;
        }
    }

    public static RawNacosClient connect(LockdServer server) throws Exception {
        return connect("127.0.0.1", server.grpcPort());
    }

    public String connectionId() {
        return connectionId;
    }

    /** The server's ability table from SetupAckRequest. */
    public Map<String, Boolean> abilities() {
        return abilities;
    }

    /** Pushes received after the setup ack (already answered), in order. */
    public Reply nextPush(long timeoutMs) throws InterruptedException {
        return pushes.poll(timeoutMs, TimeUnit.MILLISECONDS);
    }

    /** One unary request with a JSON body; {@code headers} and {@code module} are filled in. */
    public Reply request(String type, ObjectNode body, long timeoutMs) throws Exception {
        if (!body.has("headers")) {
            body.putObject("headers");
        }
        if (!body.has("module")) {
            body.put("module", type.startsWith("Lock") ? "lock" : "internal");
        }
        Payload reply = unary.withDeadlineAfter(timeoutMs, TimeUnit.MILLISECONDS).request(payload(type, body));
        return parse(reply);
    }

    /**
     * A LockOperationRequest as the Gen 1 client sends it. {@code expiredTime} null is omitted
     * (like the client's NON_NULL Jackson); {@code lockType} null is omitted.
     */
    public Reply lock(String operation, String key, Long expiredTime, String lockType) throws Exception {
        ObjectNode body = JSON.createObjectNode();
        ObjectNode li = body.putObject("lockInstance");
        if (key != null) {
            li.put("key", key);
        }
        if (expiredTime != null) {
            li.put("expiredTime", expiredTime);
        }
        if (lockType != null) {
            li.put("lockType", lockType);
        }
        body.put("lockOperationEnum", operation);
        return request("LockOperationRequest", body, 5000);
    }

    /** ACQUIRE of a NACOS_LOCK (Gen 1 shape). */
    public Reply acquire(String key, long expiredTime) throws Exception {
        return lock("ACQUIRE", key, expiredTime, "NACOS_LOCK");
    }

    /** RELEASE of a NACOS_LOCK (Gen 1 shape: the client sends the instance it locked with). */
    public Reply release(String key, long expiredTime) throws Exception {
        return lock("RELEASE", key, expiredTime, "NACOS_LOCK");
    }

    private void send(String type, ObjectNode body) {
        synchronized (toServer) {
            toServer.onNext(payload(type, body));
        }
    }

    private void answer(Reply push) {
        String responseType = switch (push.type()) {
            case "ConnectResetRequest" -> "ConnectResetResponse";
            case "ClientDetectionRequest" -> "ClientDetectionResponse";
            case "LockNotificationRequest" -> "LockNotificationResponse";
            default -> null;
        };
        if (responseType == null) {
            return;
        }
        ObjectNode r = JSON.createObjectNode();
        r.put("resultCode", 200);
        r.put("errorCode", 0);
        r.put("requestId", push.body().path("requestId").asText());
        try {
            send(responseType, r);
        } catch (RuntimeException e) {
            // stream already gone
        }
    }

    private static Payload payload(String type, ObjectNode body) {
        byte[] json;
        try {
            json = JSON.writeValueAsBytes(body);
        } catch (Exception e) {
            throw new IllegalArgumentException(e);
        }
        return Payload.newBuilder()
                .setMetadata(Metadata.newBuilder().setType(type).setClientIp("127.0.0.1").build())
                .setBody(Any.newBuilder().setValue(ByteString.copyFrom(json)).build())
                .build();
    }

    private static Reply parse(Payload p) throws Exception {
        String json = p.getBody().getValue().toString(StandardCharsets.UTF_8);
        return new Reply(p.getMetadata().getType(), JSON.readTree(json));
    }

    @Override
    public void close() {
        try {
            synchronized (toServer) {
                toServer.onCompleted();
            }
        } catch (RuntimeException e) {
            // already closed
        }
        channel.shutdownNow();
        try {
            channel.awaitTermination(5, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
