package main

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"nacos-lockd/interop/client"
	"nacos-lockd/interop/testcerts"
	"nacos-lockd/protocol"
)

func TestTLSBothPorts(t *testing.T) {
	dir := t.TempDir()
	certs, err := testcerts.Generate(dir)
	if err != nil {
		t.Fatal(err)
	}
	props := filepath.Join(dir, "application.properties")
	content := fmt.Sprintf(`nacos.remote.server.rpc.tls.enableTls=true
nacos.remote.server.rpc.tls.certChainFile=%s
nacos.remote.server.rpc.tls.certPrivateKey=%s
nacos.remote.server.rpc.tls.trustCollectionCertFile=%s
nacos.remote.server.rpc.tls.mutualAuthEnable=true
server.ssl.enabled=true
server.ssl.certificate=%s
server.ssl.certificate-private-key=%s
`, certs.ServerCert, certs.ServerKey, certs.CAFile, certs.ServerCert, certs.ServerKey)
	if err := os.WriteFile(props, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	port := freeMainPort(t)
	startProcess(t, port, filepath.Join(dir, "data"), "--config", props)

	ctx, cancel := client.Timeout(10 * time.Second)
	defer cancel()
	c, err := client.Dial(ctx, fmt.Sprintf("127.0.0.1:%d", port+1000),
		client.WithTLS(&tls.Config{RootCAs: certs.CAPool, Certificates: []tls.Certificate{certs.Client}}))
	if err != nil {
		t.Fatalf("mutual TLS client: %v", err)
	}
	defer c.Close()
	if r, err := c.Lock(ctx, protocol.OpAcquire, client.Instance("k", "NACOS_LOCK", "", client.Ms(1000), nil)); err != nil || !r.Result {
		t.Fatalf("lock over mutual TLS: %+v %v", r, err)
	}
	short, cancel2 := client.Timeout(3 * time.Second)
	defer cancel2()
	if c, err := client.Dial(short, fmt.Sprintf("127.0.0.1:%d", port+1000), client.WithTLS(&tls.Config{RootCAs: certs.CAPool})); err == nil {
		c.Close()
		t.Fatal("a client without a certificate connected")
	}
	https := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: certs.CAPool}}}
	resp, err := https.Get(fmt.Sprintf("https://127.0.0.1:%d/healthz", port))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("https healthz: %v", err)
	}
	resp.Body.Close()
	if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", port)); err == nil && resp.StatusCode == 200 {
		resp.Body.Close()
		t.Fatal("plain HTTP answered on a TLS main port")
	}
}
