// Package testoauth runs, on loopback and for tests only, what a remote
// MCP upstream is made of: a certificate authority made for the test, an
// OAuth authorization server that approves every request by itself, and
// a Streamable HTTP MCP server (the Go SDK's, behind the SDK's bearer
// token middleware) whose misbehaviour a test can turn on: tokens that
// expire, refresh tokens revoked, a restart that forgets every session,
// 401 for everything, a slow tool, a redirect to another origin, an
// answer too large.
package testoauth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority made for one test; nothing outside the
// test trusts it.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// PEM is the CA's certificate, what a ca_file holds.
	PEM []byte
}

// NewCA makes a CA.
func NewCA(t testing.TB) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "sharedos test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// WriteFile writes the CA's certificate into a file of a temporary
// directory and returns its path: a ca_file.
func (ca *CA) WriteFile(t testing.TB) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(p, ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// leaf issues a server certificate for the loopback names.
func (ca *CA) leaf(t testing.TB) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "localhost"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// start starts h on a loopback port: over TLS with a certificate of ca,
// or plain http when ca is nil. The server is closed when the test ends.
func start(t testing.TB, ca *CA, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	// A client refusing the certificate is what some tests are about;
	// the server's log line for it is noise.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	if ca == nil {
		srv.Start()
	} else {
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.leaf(t)}, MinVersion: tls.VersionTLS12}
		srv.StartTLS()
	}
	t.Cleanup(srv.Close)
	return srv
}

// Serve starts h over TLS with a certificate of ca (plain http when ca is
// nil) on a loopback port until the test ends, and returns its base URL.
func Serve(t testing.TB, ca *CA, h http.Handler) string {
	t.Helper()
	return start(t, ca, h).URL
}

// Browser follows an authorization URL as a person's browser would, to
// the loopback redirect, trusting ca (the authorization server approves
// by itself): what a test gives oauth.LoginOptions.OpenBrowser.
func Browser(t testing.TB, ca *CA) func(string) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.PEM)
	b := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	return func(u string) error {
		go func() {
			resp, err := b.Get(u)
			if err != nil {
				t.Errorf("browser: %v", err)
				return
			}
			resp.Body.Close()
		}()
		return nil
	}
}
