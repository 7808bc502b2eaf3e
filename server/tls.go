package server

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"nacos-lockd/compat"
)

// serverTLS builds a listener's TLS configuration from its PEM files; nil
// when TLS is off.
func serverTLS(f compat.TLSFiles) (*tls.Config, error) {
	if !f.Enabled {
		return nil, nil
	}
	pair, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("load TLS certificate %s / %s: %w", f.CertFile, f.KeyFile, err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	if f.CAFile != "" {
		pem, err := os.ReadFile(f.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read trusted CAs: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s holds no PEM certificate", f.CAFile)
		}
		cfg.ClientCAs = pool
	}
	switch f.ClientAuth {
	case "need":
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	case "want":
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return cfg, nil
}
