// Package s3test starts, for tests, a real S3-compatible server on a loopback
// port: moto's server (moto[server] from PyPI, pinned by tools/moto/constraints.txt,
// in the environment tools/moto/venv.sh builds). The server speaks S3's REST API
// with SigV4 requests, multipart uploads and S3's error codes, so the artifact
// store's own AWS SDK client is what the tests exercise.
package s3test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/manifoldflow/manifold/harness/pyenv"
)

// Env names the Python of a moto environment already built (make test sets it);
// without it, the first test that needs the server builds or finds the cached
// environment itself.
const Env = "MANIFOLD_MOTO_PYTHON"

// Credentials the server takes (moto checks none, but the SDK signs with them).
const (
	AccessKey = "manifold-test"
	SecretKey = "manifold-test-secret"
	Region    = "us-east-1"
)

var env = pyenv.Env{Var: Env, Tool: "moto", What: "S3 test server"}

// Python returns the interpreter of the moto environment. It never skips: without
// it, the test fails and says how to get it.
func Python(t testing.TB) string {
	t.Helper()
	return env.Python(t)
}

// Server is a running moto server.
type Server struct {
	// Endpoint is the server's URL, http://127.0.0.1:PORT.
	Endpoint string
	cmd      *exec.Cmd
	log      string
	exited   chan error
}

// Start starts a server for the test, stopped when the test ends (and killed
// with the test binary, should it die first).
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := launch(Python(t), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("moto's server log:\n%s", s.Log())
		}
	})
	return s
}

var (
	sharedMu  sync.Mutex
	shared    *Server
	sharedDir string
)

// Shared returns the test binary's one server, starting it at the first call.
// Tests share it, each in buckets of its own; TestMain stops it with StopShared
// (and it dies with the test binary in any case).
func Shared(t testing.TB) *Server {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil {
		dir, err := os.MkdirTemp("", "manifold-s3test-")
		if err != nil {
			t.Fatal(err)
		}
		s, err := launch(Python(t), dir)
		if err != nil {
			t.Fatal(err)
		}
		shared, sharedDir = s, dir
	}
	return shared
}

// StopShared stops the server Shared started, if any.
func StopShared() {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared != nil {
		shared.Stop()
		os.RemoveAll(sharedDir)
		shared = nil
	}
}

// launch starts a server on a free loopback port, logging into dir, and waits
// until it answers.
func launch(py, dir string) (*Server, error) {
	var err error
	for range 3 { // a port free a moment ago may be taken by then
		var s *Server
		if s, err = launchOnce(py, dir); err == nil {
			return s, nil
		}
	}
	return nil, err
}

func launchOnce(py, dir string) (*Server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	log := filepath.Join(dir, "moto-"+strconv.Itoa(port)+".log")
	f, err := os.Create(log)
	if err != nil {
		return nil, err
	}
	defer f.Close() // the child has its own copy
	cmd := exec.Command(py, "-m", "moto.server", "-H", "127.0.0.1", "-p", strconv.Itoa(port))
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), "PYTHONUNBUFFERED=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := spawn(cmd); err != nil {
		return nil, err
	}
	s := &Server{Endpoint: "http://127.0.0.1:" + strconv.Itoa(port), cmd: cmd, log: log, exited: make(chan error, 1)}
	go func() { s.exited <- cmd.Wait() }()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		select {
		case err := <-s.exited:
			s.exited <- err
			return nil, fmt.Errorf("moto's server exited (%v):\n%s", err, s.Log())
		default:
		}
		if resp, err := http.Get(s.Endpoint + "/"); err == nil {
			resp.Body.Close()
			return s, nil
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, fmt.Errorf("moto's server did not answer on %s within a minute:\n%s", s.Endpoint, s.Log())
		}
	}
}

// Stop kills the server (its process group) and waits for it.
func (s *Server) Stop() {
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	err := <-s.exited
	s.exited <- err
}

// Log returns what the server has logged.
func (s *Server) Log() string {
	data, _ := os.ReadFile(s.log)
	return string(data)
}

// spawnRequests carries starts to one goroutine locked to its OS thread: Linux
// delivers Pdeathsig when the thread that started a child ends, so a thread that
// lives as long as the test binary makes the server die with the binary.
var (
	spawnOnce     sync.Once
	spawnRequests chan spawnRequest
)

type spawnRequest struct {
	cmd *exec.Cmd
	err chan error
}

func spawn(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawnRequests = make(chan spawnRequest)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives as long as the process
			for r := range spawnRequests {
				r.err <- r.cmd.Start()
			}
		}()
	})
	r := spawnRequest{cmd: cmd, err: make(chan error)}
	spawnRequests <- r
	return <-r.err
}

// Env returns the environment under which a process reaches the server with the
// AWS SDK's default chain: its credentials and region, and MANIFOLD_S3_ENDPOINT.
func (s *Server) Env() []string {
	return []string{
		"AWS_ACCESS_KEY_ID=" + AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + SecretKey,
		"AWS_REGION=" + Region,
		"MANIFOLD_S3_ENDPOINT=" + s.Endpoint,
	}
}

// SetEnv sets Env in this process for the test, so that stores opened here use
// the server.
func (s *Server) SetEnv(t testing.TB) {
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	// Nothing of this machine's own AWS configuration may take part.
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_ENDPOINT_URL", "")
	t.Setenv("AWS_ENDPOINT_URL_S3", "")
}

// Client returns an S3 client of the server, for tests to look at what a store
// did.
func (s *Server) Client() *s3.Client {
	return s3.New(s3.Options{
		BaseEndpoint: aws.String(s.Endpoint),
		Region:       Region,
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, ""),
	})
}

// Bucket creates a bucket called name.
func (s *Server) Bucket(t testing.TB, name string) {
	t.Helper()
	if _, err := s.Client().CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("creating bucket %s: %v", name, err)
	}
}

// Keys returns the keys of every object in bucket under prefix.
func (s *Server) Keys(t testing.TB, bucket, prefix string) []string {
	t.Helper()
	var keys []string
	p := s3.NewListObjectsV2Paginator(s.Client(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatalf("listing %s/%s: %v", bucket, prefix, err)
		}
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	return keys
}

// Uploads returns the keys of the multipart uploads begun in bucket and neither
// completed nor aborted.
func (s *Server) Uploads(t testing.TB, bucket string) []string {
	t.Helper()
	out, err := s.Client().ListMultipartUploads(context.Background(), &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatalf("listing the multipart uploads of %s: %v", bucket, err)
	}
	var keys []string
	for _, u := range out.Uploads {
		keys = append(keys, aws.ToString(u.Key))
	}
	return keys
}
