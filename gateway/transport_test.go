package gateway

import (
	"testing"

	"github.com/rs/zerolog"
)

// TestOnBothTransports runs the core behaviours on each transport in every
// run: the handshake, lock calls, a push that wakes a waiter, a slow
// reader dropped, TLS and the shutdown's client reset. (make test-go runs
// the whole package on grpc as well, NACOS_LOCKD_TEST_TRANSPORT=grpc.)
func TestOnBothTransports(t *testing.T) {
	for _, tr := range []string{TransportGRPC, TransportH2} {
		t.Run(tr, func(t *testing.T) {
			t.Setenv("NACOS_LOCKD_TEST_TRANSPORT", tr)
			for name, test := range map[string]func(*testing.T){
				"Handshake":                     TestHandshake,
				"UnregisteredConnectionGets301": TestUnregisteredConnectionGets301,
				"Gen1AcquireRefuseRelease":      TestGen1AcquireRefuseRelease,
				"PushWakesQueuedWaiter":         TestPushWakesQueuedWaiter,
				"DisconnectReleasesLocks":       TestDisconnectReleasesLocks,
				"SlowReaderIsDropped":           TestSlowReaderIsDropped,
				"TLS":                           TestTLS,
				"ShutdownResetsClients":         TestShutdownResetsClients,
			} {
				t.Run(name, test)
			}
		})
	}
}

func TestTransportIsValidated(t *testing.T) {
	if _, err := New(Config{ListenAddr: "127.0.0.1:0", Transport: "quic"}, zerolog.Nop()); err == nil {
		t.Fatal("transport quic accepted")
	}
	for _, tr := range []string{"", TransportGRPC, TransportH2} {
		if _, err := New(Config{ListenAddr: "127.0.0.1:0", Transport: tr}, zerolog.Nop()); err != nil {
			t.Fatalf("transport %q: %v", tr, err)
		}
	}
}
