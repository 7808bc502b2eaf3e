package compat

import (
	"fmt"
	"strings"

	"nacos-lockd/settings"
)

// TLS properties: Nacos's names for the SDK gRPC port, and Spring Boot's
// PEM names for the HTTP main port (declared in settings/table.go).
var (
	PropRPCTLSEnabled    = settings.RPCTLSEnabled.Prop
	PropRPCTLSCert       = settings.RPCTLSCert.Prop
	PropRPCTLSKey        = settings.RPCTLSKey.Prop
	PropRPCTLSTrust      = settings.RPCTLSTrust.Prop
	PropRPCTLSMutualAuth = settings.RPCTLSMutualAuth.Prop

	PropHTTPSSLEnabled    = settings.HTTPSSLEnabled.Prop
	PropHTTPSSLCert       = settings.HTTPSSLCert.Prop
	PropHTTPSSLKey        = settings.HTTPSSLKey.Prop
	PropHTTPSSLTrust      = settings.HTTPSSLTrust.Prop
	PropHTTPSSLClientAuth = settings.HTTPSSLClientAuth.Prop
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
	if s.GRPC.Enabled, err = p.Bool(PropRPCTLSEnabled, settings.RPCTLSEnabled.DefaultBool()); err != nil {
		return s, err
	}
	s.GRPC.CertFile, s.GRPC.KeyFile, s.GRPC.CAFile = strings.TrimSpace(p[PropRPCTLSCert]), strings.TrimSpace(p[PropRPCTLSKey]), strings.TrimSpace(p[PropRPCTLSTrust])
	mutual, err := p.Bool(PropRPCTLSMutualAuth, settings.RPCTLSMutualAuth.DefaultBool())
	if err != nil {
		return s, err
	}
	s.GRPC.ClientAuth = "none"
	if mutual {
		s.GRPC.ClientAuth = "need"
	}
	if s.HTTP.Enabled, err = p.Bool(PropHTTPSSLEnabled, settings.HTTPSSLEnabled.DefaultBool()); err != nil {
		return s, err
	}
	s.HTTP.CertFile, s.HTTP.KeyFile, s.HTTP.CAFile = strings.TrimSpace(p[PropHTTPSSLCert]), strings.TrimSpace(p[PropHTTPSSLKey]), strings.TrimSpace(p[PropHTTPSSLTrust])
	s.HTTP.ClientAuth = strings.ToLower(strings.TrimSpace(p.String(PropHTTPSSLClientAuth, settings.HTTPSSLClientAuth.DefaultString())))
	// An empty value is accepted too, and means none.
	if s.HTTP.ClientAuth != "" && !settings.HTTPSSLClientAuth.CheckChoice(s.HTTP.ClientAuth) {
		return s, &PropertyError{Key: PropHTTPSSLClientAuth, Value: p[PropHTTPSSLClientAuth], Reason: "want " + settings.HTTPSSLClientAuth.ChoiceList()}
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
