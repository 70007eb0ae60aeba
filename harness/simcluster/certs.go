package simcluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// pki holds the files of the cluster's certificate authority: a CA, one serving
// certificate for 127.0.0.1 (the API server, the webhooks and the real nodes'
// kubelets use it), the API server's client certificate for kubelets, and the key
// that signs service account tokens. The CA signs client certificates on demand
// (clientCert).
type pki struct {
	CACert     string // PEM file
	CAPEM      []byte
	ServeCert  string // PEM file; also served as tls.crt for the webhook
	ServeKey   string // PEM file; also tls.key
	ServingDir string // holds tls.crt and tls.key
	SAKey      string // RSA private key, PEM
	// KubeletClientCert and KubeletClientKey are the API server's identity when it
	// calls a kubelet (logs, exec): a member of system:masters.
	KubeletClientCert, KubeletClientKey string

	dir    string
	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
	serial int64
}

func newPKI(dir string) (*pki, error) {
	p := &pki{
		CACert:     filepath.Join(dir, "ca.crt"),
		ServingDir: filepath.Join(dir, "serving"),
		SAKey:      filepath.Join(dir, "sa.key"),
	}
	p.ServeCert = filepath.Join(p.ServingDir, "tls.crt")
	p.ServeKey = filepath.Join(p.ServingDir, "tls.key")
	if err := os.MkdirAll(p.ServingDir, 0o700); err != nil {
		return nil, err
	}
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	ca := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "manifold-simcluster-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	if p.ca, err = x509.ParseCertificate(caDER); err != nil {
		return nil, err
	}
	p.dir, p.caKey, p.serial = dir, caKey, 2
	p.CAPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	if err := os.WriteFile(p.CACert, p.CAPEM, 0o644); err != nil {
		return nil, err
	}

	serveKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serve := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
	}
	serveDER, err := x509.CreateCertificate(rand.Reader, serve, ca, &serveKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(p.ServeCert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: serveDER}), 0o644); err != nil {
		return nil, err
	}
	if err := writeKey(p.ServeKey, serveKey); err != nil {
		return nil, err
	}

	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	if err := writeKey(p.SAKey, saKey); err != nil {
		return nil, err
	}
	if p.KubeletClientCert, p.KubeletClientKey, err = p.clientCert("kube-apiserver-kubelet-client", "system:masters"); err != nil {
		return nil, err
	}
	return p, nil
}

// clientCert writes a client certificate for user cn in group org, signed by the
// CA, and its key, and returns their paths.
func (p *pki) clientCert(cn, org string) (certPath, keyPath string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	now := time.Now()
	p.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(p.serial),
		Subject:      pkix.Name{CommonName: cn, Organization: []string{org}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		return "", "", err
	}
	dir := filepath.Join(p.dir, "clients")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", err
	}
	base := filepath.Join(dir, strings.NewReplacer(":", "-", "/", "-").Replace(cn))
	if err := os.WriteFile(base+".crt", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return "", "", err
	}
	if err := writeKey(base+".key", key); err != nil {
		return "", "", err
	}
	return base + ".crt", base + ".key", nil
}

func writeKey(path string, key any) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
}

// selfSigned returns a self-signed certificate for name, valid for ten years,
// and its key, both PEM.
func selfSigned(name string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{name},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}
