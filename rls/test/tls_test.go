package test

import (
	"context"
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
	"testing"
	"time"

	pbext "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

type certs struct {
	dir    string
	pool   *x509.CertPool
	client tls.Certificate
}

// makeCerts writes a CA, a server certificate for 127.0.0.1 and a client certificate.
func makeCerts(t *testing.T) certs {
	t.Helper()
	dir := t.TempDir()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	write := func(name, typ string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	caKey := key()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	write("ca.crt", "CERTIFICATE", caDER)
	leaf := func(name string, serial int64, usage x509.ExtKeyUsage) tls.Certificate {
		k := key()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kb, _ := x509.MarshalECPrivateKey(k)
		write(name+".crt", "CERTIFICATE", der)
		write(name+".key", "EC PRIVATE KEY", kb)
		return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: k}
	}
	leaf("server", 2, x509.ExtKeyUsageServerAuth)
	client := leaf("client", 3, x509.ExtKeyUsageClientAuth)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return certs{dir: dir, pool: pool, client: client}
}

// TestGRPCMutualTLS: GRPC_SERVER_USE_TLS with a client CA (the variables Envoy Gateway sets)
// serves clients that present a certificate signed by it and refuses the others.
func TestGRPCMutualTLS(t *testing.T) {
	r := startRedis(t)
	root, _ := configDir(t, readmeExamples(t))
	c := makeCerts(t)
	gp, hp := freePort(t), freePort(t)
	p := start(t, ourBinary, []string{
		fmt.Sprintf("REDIS_URL=127.0.0.1:%d", r.Port), "RUNTIME_ROOT=" + root, "RUNTIME_SUBDIRECTORY=ratelimit",
		"GRPC_HOST=127.0.0.1", "HOST=127.0.0.1", fmt.Sprintf("GRPC_PORT=%d", gp), fmt.Sprintf("HTTP_PORT=%d", hp),
		"GRPC_SERVER_USE_TLS=true", "GRPC_SERVER_TLS_CERT=" + filepath.Join(c.dir, "server.crt"),
		"GRPC_SERVER_TLS_KEY=" + filepath.Join(c.dir, "server.key"), "GRPC_SERVER_TLS_CA_CERT=" + filepath.Join(c.dir, "ca.crt"),
	})
	waitHealthy(t, "rls", p, hp)
	try := func(withCert bool) error {
		cfg := &tls.Config{RootCAs: c.pool, MinVersion: tls.VersionTLS12}
		if withCert {
			cfg.Certificates = []tls.Certificate{c.client}
		}
		conn, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", gp), grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
		if err != nil {
			return err
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, err = pb.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, &pb.RateLimitRequest{
			Domain: "internal", Descriptors: []*pbext.RateLimitDescriptor{D("azure", "x")}})
		return err
	}
	if err := try(true); err != nil {
		t.Fatalf("client with a certificate: %v", err)
	}
	if err := try(false); err == nil {
		t.Fatal("client without a certificate was served")
	}
}

// TestRedisTLSAndAuth: REDIS_TLS with REDIS_TLS_CACERT and REDIS_AUTH against a server that only
// speaks TLS and requires a password.
func TestRedisTLSAndAuth(t *testing.T) {
	server := requireEnv(t, "RL_SERVER", "redis-server")
	module := requireEnv(t, "RL_MODULE", "")
	c := makeCerts(t)
	port := freePort(t)
	p := start(t, server, nil, "--port", "0", "--tls-port", fmt.Sprint(port), "--bind", "127.0.0.1",
		"--tls-cert-file", filepath.Join(c.dir, "server.crt"), "--tls-key-file", filepath.Join(c.dir, "server.key"),
		"--tls-ca-cert-file", filepath.Join(c.dir, "ca.crt"), "--tls-auth-clients", "no",
		"--requirepass", "s3cret", "--save", "", "--appendonly", "no", "--loadmodule", module)
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port), &tls.Config{RootCAs: c.pool, MinVersion: tls.VersionTLS12})
		if err == nil {
			conn.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server with TLS did not start: %v\n%s", err, p.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	root, _ := configDir(t, readmeExamples(t))
	gp, hp := freePort(t), freePort(t)
	env := []string{
		fmt.Sprintf("REDIS_URL=127.0.0.1:%d", port), "REDIS_TLS=true", "REDIS_TLS_CACERT=" + filepath.Join(c.dir, "ca.crt"),
		"RUNTIME_ROOT=" + root, "RUNTIME_SUBDIRECTORY=ratelimit", "GRPC_HOST=127.0.0.1", "HOST=127.0.0.1",
		fmt.Sprintf("GRPC_PORT=%d", gp), fmt.Sprintf("HTTP_PORT=%d", hp),
	}
	ok := start(t, ourBinary, append(env, "REDIS_AUTH=s3cret"))
	waitHealthy(t, "rls", ok, hp)
	s := &Service{Name: "rls", GRPC: dial(t, gp), HTTPPort: hp, proc: ok}
	if got := call(t, s, "internal", D("azure", "x")).Statuses[0].LimitRemaining; got != 99 {
		t.Fatalf("over TLS with auth: remaining %d", got)
	}
}

// TestRedisUnixSocket: REDIS_SOCKET_TYPE=unix with a socket path in REDIS_URL.
func TestRedisUnixSocket(t *testing.T) {
	server := requireEnv(t, "RL_SERVER", "redis-server")
	module := requireEnv(t, "RL_MODULE", "")
	sock := filepath.Join(t.TempDir(), "redis.sock")
	p := start(t, server, nil, "--port", "0", "--unixsocket", sock, "--save", "", "--appendonly", "no", "--loadmodule", module)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on a unix socket did not start:\n%s", p.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	root, _ := configDir(t, readmeExamples(t))
	gp, hp := freePort(t), freePort(t)
	q := start(t, ourBinary, []string{"REDIS_SOCKET_TYPE=unix", "REDIS_URL=" + sock, "RUNTIME_ROOT=" + root,
		"RUNTIME_SUBDIRECTORY=ratelimit", "GRPC_HOST=127.0.0.1", "HOST=127.0.0.1",
		fmt.Sprintf("GRPC_PORT=%d", gp), fmt.Sprintf("HTTP_PORT=%d", hp)})
	waitHealthy(t, "rls", q, hp)
	s := &Service{Name: "rls", GRPC: dial(t, gp), HTTPPort: hp, proc: q}
	call(t, s, "internal", D("azure", "u"))
	if got := call(t, s, "internal", D("azure", "u")).Statuses[0].LimitRemaining; got != 98 {
		t.Fatalf("over a unix socket: remaining %d", got)
	}
}
