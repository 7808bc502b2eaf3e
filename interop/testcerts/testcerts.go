// Package testcerts makes a throwaway CA with server and client
// certificates for TLS tests: the server certificate names 127.0.0.1,
// ::1 and localhost. Never use them outside tests.
package testcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Set is a CA and two leaf certificates, in memory and as PEM files.
type Set struct {
	CAPool     *x509.CertPool
	Server     tls.Certificate
	Client     tls.Certificate
	OtherCA    *x509.CertPool // a CA that signed nothing here
	CAFile     string
	ServerCert string // PEM chain
	ServerKey  string // PEM PKCS#8 key
	ClientCert string
	ClientKey  string
}

// Generate writes the set into dir.
func Generate(dir string) (*Set, error) {
	caKey, caCert, caDER, err := newCA("nacos-lockd test CA")
	if err != nil {
		return nil, err
	}
	_, otherCert, _, err := newCA("unrelated CA")
	if err != nil {
		return nil, err
	}
	s := &Set{CAPool: x509.NewCertPool(), OtherCA: x509.NewCertPool()}
	s.CAPool.AddCert(caCert)
	s.OtherCA.AddCert(otherCert)
	s.CAFile = filepath.Join(dir, "ca.pem")
	if err := writePEM(s.CAFile, "CERTIFICATE", caDER); err != nil {
		return nil, err
	}
	s.Server, s.ServerCert, s.ServerKey, err = leaf(dir, "server", caKey, caCert, x509.ExtKeyUsageServerAuth)
	if err != nil {
		return nil, err
	}
	s.Client, s.ClientCert, s.ClientKey, err = leaf(dir, "client", caKey, caCert, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func newCA(name string) (*ecdsa.PrivateKey, *x509.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return key, cert, der, err
}

func leaf(dir, name string, caKey *ecdsa.PrivateKey, ca *x509.Certificate, usage x509.ExtKeyUsage) (tls.Certificate, string, string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, "", "", err
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "nacos-lockd test " + name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, "", "", err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return tls.Certificate{}, "", "", err
	}
	certPath, keyPath := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	if err := writePEM(certPath, "CERTIFICATE", der); err != nil {
		return tls.Certificate{}, "", "", err
	}
	if err := writePEM(keyPath, "PRIVATE KEY", keyDER); err != nil {
		return tls.Certificate{}, "", "", err
	}
	pair, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err != nil {
		return tls.Certificate{}, "", "", fmt.Errorf("load %s pair: %w", name, err)
	}
	return pair, certPath, keyPath, nil
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}
