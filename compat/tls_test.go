package compat

import (
	"strings"
	"testing"
)

func TestTLSSettings(t *testing.T) {
	s, err := TLSSettingsFrom(Properties{})
	if err != nil || s.GRPC.Enabled || s.HTTP.Enabled {
		t.Fatalf("defaults: %+v %v", s, err)
	}
	s, err = TLSSettingsFrom(Properties{
		PropRPCTLSEnabled: "true", PropRPCTLSCert: "c.pem", PropRPCTLSKey: "k.pem", PropRPCTLSTrust: "ca.pem", PropRPCTLSMutualAuth: "true",
		PropHTTPSSLEnabled: "true", PropHTTPSSLCert: "hc.pem", PropHTTPSSLKey: "hk.pem",
	})
	if err != nil || s.GRPC != (TLSFiles{true, "c.pem", "k.pem", "ca.pem", "need"}) || s.HTTP != (TLSFiles{true, "hc.pem", "hk.pem", "", "none"}) {
		t.Fatalf("set: %+v %v", s, err)
	}
	for bad, want := range map[string]Properties{
		"needs a certificate": {PropRPCTLSEnabled: "true"},
		"trusted CA":          {PropRPCTLSEnabled: "true", PropRPCTLSCert: "c", PropRPCTLSKey: "k", PropRPCTLSMutualAuth: "true"},
		"want none, want or":  {PropHTTPSSLClientAuth: "sometimes"},
		"want true or false":  {PropHTTPSSLEnabled: "on"},
	} {
		if _, err := TLSSettingsFrom(want); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("%v: %v", want, err)
		}
	}
}
