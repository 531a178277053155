package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

// A running is one run of the server in this process (the sdktest module runs the binary
// with the AWS SDK).
type running struct {
	url    string
	cancel context.CancelFunc
	done   chan error
	out    *syncBuffer // what it printed
	log    *syncBuffer // what it logged
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// start runs the server with cfg (over a test's data directory unless cfg.dir is set) and
// waits for it to serve.
func start(t *testing.T, cfg config) *running {
	t.Helper()
	if cfg.dir == "" {
		cfg.dir = filepath.Join(t.TempDir(), "data")
	}
	cfg.addr, cfg.partitions = "127.0.0.1:0", 2
	r := &running{done: make(chan error, 1), out: &syncBuffer{}, log: &syncBuffer{}}
	ready := make(chan string, 1)
	cfg.ready = func(url string) { ready <- url }
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- run(ctx, cfg, slog.New(slog.NewTextHandler(r.log, nil)), r.out) }()
	select {
	case r.url = <-ready:
	case err := <-r.done:
		cancel()
		t.Fatalf("the server ended: %v\n%s", err, r.log)
	}
	return r
}

// stop stops the server as a SIGTERM does and checks it stopped cleanly.
func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	require.NoError(t, <-r.done, r.log.String())
	require.Contains(t, r.log.String(), "every ack is on disk")
}

// post sends an unsigned JSON request of action.
func post(t *testing.T, c *http.Client, url, action, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("X-Amz-Target", "AmazonSQS."+action)
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestSignaturesByDefault: with no -credentials the first start generates a pair into the
// data directory (mode 0600) and prints it; an unsigned request is refused; a restart uses
// the same pair and prints no secret.
func TestSignaturesByDefault(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	r := start(t, config{dir: dir})
	require.Contains(t, r.out.String(), "export AWS_ACCESS_KEY_ID=AKSQSD")
	info, err := os.Stat(filepath.Join(dir, credentialsName))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	keys, err := loadCredentials(filepath.Join(dir, credentialsName))
	require.NoError(t, err)
	require.Len(t, keys, 1)
	for id, secret := range keys {
		require.Contains(t, r.out.String(), "AWS_ACCESS_KEY_ID="+id+" AWS_SECRET_ACCESS_KEY="+secret)
	}
	status, body := post(t, http.DefaultClient, r.url, "ListQueues", `{}`)
	require.Equal(t, http.StatusForbidden, status)
	require.Contains(t, body, "MissingAuthenticationToken")
	r.stop(t)

	r = start(t, config{dir: dir})
	require.Empty(t, r.out.String())
	require.Contains(t, r.log.String(), "checking every request's signature")
	again, err := loadCredentials(filepath.Join(dir, credentialsName))
	require.NoError(t, err)
	require.Equal(t, keys, again)
	r.stop(t)
}

// TestNoAuthOverTLS: -no-auth says so at start and takes unsigned requests; with
// -tls-cert and -tls-key the server speaks HTTPS only.
func TestNoAuthOverTLS(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t)
	r := start(t, config{noAuth: true, tlsCert: certFile, tlsKey: keyFile})
	require.Contains(t, r.out.String(), "WARNING: no signature is checked")
	require.Contains(t, r.log.String(), "NO SIGNATURE IS CHECKED")
	require.True(t, strings.HasPrefix(r.url, "https://127.0.0.1:"), r.url)

	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	status, body := post(t, c, r.url, "CreateQueue", `{"QueueName":"orders"}`)
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `"QueueUrl":"https://127.0.0.1:`)
	status, body = post(t, c, r.url, "SendMessage", `{"QueueUrl":"`+r.url+`/orders","MessageBody":"hi"}`)
	require.Equal(t, http.StatusOK, status, body)

	plain := &http.Transport{}
	defer plain.CloseIdleConnections()
	status, _ = post(t, &http.Client{Transport: plain}, "http"+strings.TrimPrefix(r.url, "https"), "ListQueues", `{}`)
	require.Equal(t, http.StatusBadRequest, status, "plain HTTP to the TLS port")
	r.stop(t)
}

// TestDamagedCatalogStops: a damaged queue catalogue stops the server at start, naming
// the file.
func TestDamagedCatalogStops(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	r := start(t, config{dir: dir, noAuth: true})
	status, body := post(t, http.DefaultClient, r.url, "CreateQueue", `{"QueueName":"orders"}`)
	require.Equal(t, http.StatusOK, status, body)
	r.stop(t)
	path := filepath.Join(dir, catalogName)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, data[:len(data)-5], 0o600))
	err = run(context.Background(), config{dir: dir, addr: "127.0.0.1:0", partitions: 1, noAuth: true}, slog.New(slog.DiscardHandler), io.Discard)
	require.ErrorIs(t, err, errCorruptCatalog)
	require.ErrorContains(t, err, path)
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key, and returns their
// files and a pool that trusts it.
func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sqsd test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600))
	return certFile, keyFile, pool
}

// TestSyncEachSecond: with -fsync=false the server syncs its log each second (the flag's
// promise: a crash of the machine loses about the last second of sends), goes on after a
// failed sync, and stops when the server closes; with -fsync it runs no such loop.
func TestSyncEachSecond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &server{logger: slog.New(slog.DiscardHandler), stopSync: make(chan struct{}), syncDone: make(chan struct{})}
		var syncs int
		go s.syncEach(time.Second, func() error {
			syncs++
			if syncs == 2 {
				return errors.New("disk gone for a moment")
			}
			return nil
		})
		time.Sleep(3500 * time.Millisecond)
		synctest.Wait()
		require.Equal(t, 3, syncs, "one a second, the failed one too")
		close(s.stopSync)
		<-s.syncDone
		time.Sleep(5 * time.Second)
		require.Equal(t, 3, syncs, "none after the close")
	})
	for _, fsync := range []bool{false, true} {
		s, err := openServer(config{dir: filepath.Join(t.TempDir(), "data"), noAuth: true, partitions: 1, fsync: fsync, baseURL: "http://localhost:9324"}, slog.New(slog.DiscardHandler))
		require.NoError(t, err)
		require.Equal(t, !fsync, s.stopSync != nil, "fsync=%t: a sync loop", fsync)
		require.NoError(t, s.Close())
	}
}
