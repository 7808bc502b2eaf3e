package compat

import (
	"fmt"
	"strings"
)

// TLS properties: Nacos's names for the SDK gRPC port, and Spring Boot's
// PEM names for the HTTP main port.
const (
	PropRPCTLSEnabled    = "nacos.remote.server.rpc.tls.enableTls"
	PropRPCTLSCert       = "nacos.remote.server.rpc.tls.certChainFile"
	PropRPCTLSKey        = "nacos.remote.server.rpc.tls.certPrivateKey"
	PropRPCTLSTrust      = "nacos.remote.server.rpc.tls.trustCollectionCertFile"
	PropRPCTLSMutualAuth = "nacos.remote.server.rpc.tls.mutualAuthEnable"

	PropHTTPSSLEnabled    = "server.ssl.enabled"
	PropHTTPSSLCert       = "server.ssl.certificate"
	PropHTTPSSLKey        = "server.ssl.certificate-private-key"
	PropHTTPSSLTrust      = "server.ssl.trust-certificate"
	PropHTTPSSLClientAuth = "server.ssl.client-auth"
)

// TLSFiles is one listener's TLS setup.
type TLSFiles struct {
	Enabled    bool
	CertFile   string // PEM certificate chain
	KeyFile    string // PEM private key
	CAFile     string // PEM CAs that sign client certificates
	ClientAuth string // none, want or need
}

// TLSSettings covers both listeners.
type TLSSettings struct {
	GRPC TLSFiles
	HTTP TLSFiles
}

// TLSSettingsFrom reads both listeners' TLS properties.
func TLSSettingsFrom(p Properties) (TLSSettings, error) {
	var s TLSSettings
	var err error
	if s.GRPC.Enabled, err = p.Bool(PropRPCTLSEnabled, false); err != nil {
		return s, err
	}
	s.GRPC.CertFile, s.GRPC.KeyFile, s.GRPC.CAFile = strings.TrimSpace(p[PropRPCTLSCert]), strings.TrimSpace(p[PropRPCTLSKey]), strings.TrimSpace(p[PropRPCTLSTrust])
	mutual, err := p.Bool(PropRPCTLSMutualAuth, false)
	if err != nil {
		return s, err
	}
	s.GRPC.ClientAuth = "none"
	if mutual {
		s.GRPC.ClientAuth = "need"
	}
	if s.HTTP.Enabled, err = p.Bool(PropHTTPSSLEnabled, false); err != nil {
		return s, err
	}
	s.HTTP.CertFile, s.HTTP.KeyFile, s.HTTP.CAFile = strings.TrimSpace(p[PropHTTPSSLCert]), strings.TrimSpace(p[PropHTTPSSLKey]), strings.TrimSpace(p[PropHTTPSSLTrust])
	s.HTTP.ClientAuth = strings.ToLower(strings.TrimSpace(p.String(PropHTTPSSLClientAuth, "none")))
	switch s.HTTP.ClientAuth {
	case "", "none", "want", "need":
	default:
		return s, &PropertyError{Key: PropHTTPSSLClientAuth, Value: p[PropHTTPSSLClientAuth], Reason: "want none, want or need"}
	}
	for name, f := range map[string]TLSFiles{PropRPCTLSEnabled: s.GRPC, PropHTTPSSLEnabled: s.HTTP} {
		if !f.Enabled {
			continue
		}
		if f.CertFile == "" || f.KeyFile == "" {
			return s, fmt.Errorf("%s=true needs a certificate and a private key file", name)
		}
		if (f.ClientAuth == "need" || f.ClientAuth == "want") && f.CAFile == "" {
			return s, fmt.Errorf("%s: client certificate checks need a trusted CA file", name)
		}
	}
	return s, nil
}
