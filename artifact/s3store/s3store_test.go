package s3store

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/go-cmp/cmp"

	"github.com/manifoldflow/manifold/artifact"
	"github.com/manifoldflow/manifold/harness/s3test"
	"github.com/manifoldflow/manifold/sdk"
)

// writerEnv, when set, makes the test binary a writer that a test kills half-way
// (see killedWriter): it puts a value of the given size, printing how many bytes
// it has sent.
const writerEnv = "S3STORE_TEST_WRITER"

func TestMain(m *testing.M) {
	if spec := os.Getenv(writerEnv); spec != "" {
		os.Exit(writer(spec))
	}
	code := m.Run()
	s3test.StopShared()
	os.Exit(code)
}

// newStore returns a store in a fresh bucket of the shared server, its bucket,
// and the server; opts may set the part size and the HTTP client.
func newStore(t *testing.T, prefix string, o Options) (*Store, string, *s3test.Server) {
	t.Helper()
	shared := s3test.Shared(t)
	shared.SetEnv(t)
	bucket := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	bucket = "t-" + bucket[:min(len(bucket), 50)] + "-" + strconv.Itoa(int(buckets.Add(1)))
	shared.Bucket(t, bucket)
	if o.Endpoint == "" {
		o.Endpoint = shared.Endpoint
	}
	s, err := New(context.Background(), "s3://"+bucket+"/"+prefix, o)
	if err != nil {
		t.Fatal(err)
	}
	return s, bucket, shared
}

var buckets atomic.Int64

func TestPutGet(t *testing.T) {
	s, bucket, srv := newStore(t, "flows/hello/run-1", Options{})
	ctx := context.Background()
	if err := s.Put(ctx, "greet/greeting.json", []byte(`"hello"`+"\n")); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "greet/greeting.json")
	if err != nil || string(got) != "\"hello\"\n" {
		t.Fatalf("Get = %q, %v", got, err)
	}
	// A second Put replaces the value whole.
	if err := s.Put(ctx, "greet/greeting.json", []byte(`"again"`)); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, "greet/greeting.json"); string(got) != `"again"` {
		t.Errorf("after a second Put, Get = %q", got)
	}
	if diff := cmp.Diff([]string{"flows/hello/run-1/greet/greeting.json"}, srv.Keys(t, bucket, "")); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
	if got, want := s.Location("greet"), "s3://"+bucket+"/flows/hello/run-1/greet"; got != want {
		t.Errorf("Location = %q, want %q", got, want)
	}
	_, err = s.Get(ctx, "greet/missing.json")
	if !artifact.IsNotExist(err) || !strings.Contains(err.Error(), "s3://"+bucket+"/flows/hello/run-1/greet/missing.json") {
		t.Errorf("Get of a missing key: %v, want fs.ErrNotExist naming the object", err)
	}
	for _, key := range []string{"", "/a", "../a", "a/../../b", "a//b"} {
		if err := s.Put(ctx, key, nil); err == nil {
			t.Errorf("Put(%q) succeeded", key)
		}
	}
}

// TestContextPutGet: sdk.Context's Put, Get and GetIndex through the store, with
// the layout of the local run directory.
func TestContextPutGet(t *testing.T) {
	s, bucket, srv := newStore(t, "p/hello/r1", Options{})
	put := sdk.NewContext(context.Background(), sdk.ContextConfig{Flow: "hello", Step: "greet", Index: -1, Store: s})
	if err := put.Put("greeting", "hello, s3"); err != nil {
		t.Fatal(err)
	}
	item := sdk.NewContext(context.Background(), sdk.ContextConfig{Flow: "hello", Step: "fan", Item: "b", Index: 1, Store: s})
	if err := item.Put("out", map[string]int{"n": 2}); err != nil {
		t.Fatal(err)
	}
	if got, want := item.ArtifactDir(), "s3://"+bucket+"/p/hello/r1/fan/1"; got != want {
		t.Errorf("ArtifactDir = %q, want %q", got, want)
	}
	get := sdk.NewContext(context.Background(), sdk.ContextConfig{Flow: "hello", Step: "join", Index: -1, Store: s})
	var msg string
	if err := get.Get("greet", "greeting", &msg); err != nil || msg != "hello, s3" {
		t.Errorf("Get = %q, %v", msg, err)
	}
	var out map[string]int
	if err := get.GetIndex("fan", 1, "out", &out); err != nil || out["n"] != 2 {
		t.Errorf("GetIndex = %v, %v", out, err)
	}
	want := []string{"p/hello/r1/fan/1/out.json", "p/hello/r1/greet/greeting.json"}
	if diff := cmp.Diff(want, srv.Keys(t, bucket, "")); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
}

// TestMissingArtifact: a Get of what no step put names the step, the artifact,
// the item and the object it looked for.
func TestMissingArtifact(t *testing.T) {
	s, bucket, _ := newStore(t, "runs/foreach/r2", Options{})
	c := sdk.NewContext(context.Background(), sdk.ContextConfig{Flow: "foreach", Step: "report", Index: -1, Store: s})
	var v any
	err := c.Get("plan", "regions", &v)
	for _, want := range []string{`step "plan" has no artifact "regions"`, "s3://" + bucket + "/runs/foreach/r2/plan/regions.json"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Get of a missing artifact: %v; want it to say %q", err, want)
		}
	}
	err = c.GetIndex("process", 2, "result", &v)
	for _, want := range []string{`item 2 of step "process" has no artifact "result"`, "/runs/foreach/r2/process/2/result.json"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("GetIndex of a missing artifact: %v; want it to say %q", err, want)
		}
	}
}

// counting counts the requests of each S3 operation a store sends.
type counting struct {
	mu  sync.Mutex
	ops map[string]int
}

func (c *counting) Do(req *http.Request) (*http.Response, error) {
	op := req.Method
	q := req.URL.Query()
	switch {
	case q.Has("uploads"):
		op = "CreateMultipartUpload"
	case q.Has("partNumber"):
		op = "UploadPart"
	case q.Has("uploadId") && req.Method == http.MethodPost:
		op = "CompleteMultipartUpload"
	case q.Has("uploadId") && req.Method == http.MethodDelete:
		op = "AbortMultipartUpload"
	}
	c.mu.Lock()
	c.ops[op]++
	c.mu.Unlock()
	return http.DefaultClient.Do(req)
}

// TestLargeValue: a 100 MB value goes up in parts, completed once, and comes back
// byte for byte.
func TestLargeValue(t *testing.T) {
	client := &counting{ops: map[string]int{}}
	s, bucket, srv := newStore(t, "big", Options{HTTPClient: client})
	data := make([]byte, 100<<20)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	start := time.Now()
	if err := s.Put(ctx, "train/weights.json", data); err != nil {
		t.Fatal(err)
	}
	put := time.Since(start)
	got, err := s.Get(ctx, "train/weights.json")
	if err != nil {
		t.Fatal(err)
	}
	if sha256.Sum256(got) != sha256.Sum256(data) {
		t.Fatalf("Get returned %d bytes that differ from the %d put", len(got), len(data))
	}
	t.Logf("100 MB: put in %s, got in %s", put.Round(time.Millisecond), (time.Since(start) - put).Round(time.Millisecond))
	client.mu.Lock()
	wantParts := (100<<20 + DefaultPartSize - 1) / DefaultPartSize
	if client.ops["CreateMultipartUpload"] != 1 || client.ops["UploadPart"] != wantParts || client.ops["CompleteMultipartUpload"] != 1 || client.ops["PUT"] != 0 {
		t.Errorf("requests %v: want one multipart upload of %d parts, completed once", client.ops, wantParts)
	}
	client.mu.Unlock()
	if uploads := srv.Uploads(t, bucket); len(uploads) != 0 {
		t.Errorf("multipart uploads left open: %v", uploads)
	}

	// The same through sdk.Context: a JSON value of over 100 MB.
	c := sdk.NewContext(ctx, sdk.ContextConfig{Flow: "f", Step: "train", Index: -1, Store: s})
	big := strings.Repeat("0123456789abcdef", 100<<20/16+1)
	if err := c.Put("big", big); err != nil {
		t.Fatal(err)
	}
	var back string
	if err := c.Get("train", "big", &back); err != nil || back != big {
		t.Errorf("Get of a %d-byte string: %d bytes, %v", len(big), len(back), err)
	}
}

// TestConcurrentItems: the items of a foreach step, each a writer of its own
// (as each is a pod of its own), put their artifacts at once; the step after
// them reads every item's.
func TestConcurrentItems(t *testing.T) {
	_, bucket, srv := newStore(t, "", Options{})
	const items = 12
	url := "s3://" + bucket + "/flows/foreach/run-7"
	var wg sync.WaitGroup
	errs := make([]error, items)
	for i := range items {
		wg.Go(func() {
			s, err := New(context.Background(), url, Options{Endpoint: srv.Endpoint, PartSize: MinPartSize})
			if err != nil {
				errs[i] = err
				return
			}
			c := sdk.NewContext(context.Background(), sdk.ContextConfig{Flow: "foreach", Step: "process", Item: "region-" + strconv.Itoa(i), Index: i, Store: s})
			// Each item puts two artifacts, the second larger than a part, so
			// single PUTs and multipart uploads of the items interleave.
			if err := c.Put("result", fmt.Sprintf("%s: %d objects", c.Item(), 100*(i+1))); err != nil {
				errs[i] = err
				return
			}
			errs[i] = c.Put("blob", strings.Repeat(strconv.Itoa(i%10), 6<<20))
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("item %d: %v", i, err)
		}
	}
	s, err := New(context.Background(), url, Options{Endpoint: srv.Endpoint})
	if err != nil {
		t.Fatal(err)
	}
	if uploads := srv.Uploads(t, bucket); len(uploads) != 0 {
		t.Errorf("multipart uploads left open: %v", uploads)
	}
	join := sdk.NewContext(context.Background(), sdk.ContextConfig{Flow: "foreach", Step: "report", Index: -1, Store: s})
	var want []string
	for i := range items {
		var got, blob string
		if err := join.GetIndex("process", i, "result", &got); err != nil {
			t.Fatal(err)
		}
		if w := fmt.Sprintf("region-%d: %d objects", i, 100*(i+1)); got != w {
			t.Errorf("item %d put %q, want %q", i, got, w)
		}
		if err := join.GetIndex("process", i, "blob", &blob); err != nil || blob != strings.Repeat(strconv.Itoa(i%10), 6<<20) {
			t.Errorf("item %d's blob: %d bytes, %v", i, len(blob), err)
		}
		want = append(want, fmt.Sprintf("flows/foreach/run-7/process/%d/blob.json", i), fmt.Sprintf("flows/foreach/run-7/process/%d/result.json", i))
	}
	slices.Sort(want)
	if diff := cmp.Diff(want, srv.Keys(t, bucket, "")); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
}

// TestKilledWriter: a writer killed while it sends a value, in one PUT or in
// parts, leaves nothing a reader can see; the next writer puts it whole.
func TestKilledWriter(t *testing.T) {
	for _, tc := range []struct {
		name      string
		size      int
		killAfter int
		multipart bool
	}{
		{"put", 4 << 20, 1 << 20, false},
		// Parts of 5 MB, one at a time: killed in the third part, after two
		// parts are in.
		{"multipart", 30 << 20, 12 << 20, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, bucket, srv := newStore(t, "runs/f/r", Options{PartSize: MinPartSize})
			url := "s3://" + bucket + "/runs/f/r"
			sent := killedWriter(t, srv, url, tc.size, tc.killAfter)
			if sent >= tc.size {
				t.Fatalf("the writer sent all %d bytes before it was killed", sent)
			}
			if keys := srv.Keys(t, bucket, ""); len(keys) != 0 {
				t.Errorf("a killed writer left objects: %v", keys)
			}
			_, err := s.Get(context.Background(), "train/model.json")
			if !artifact.IsNotExist(err) {
				t.Errorf("Get after a killed writer: %v, want no such artifact", err)
			}
			if uploads := srv.Uploads(t, bucket); tc.multipart && len(uploads) != 1 {
				t.Errorf("multipart uploads in progress: %v, want the killed writer's", uploads)
			}
			data := bytes.Repeat([]byte("x"), tc.size)
			if err := s.Put(context.Background(), "train/model.json", data); err != nil {
				t.Fatal(err)
			}
			if got, err := s.Get(context.Background(), "train/model.json"); err != nil || !bytes.Equal(got, data) {
				t.Errorf("after the next writer: %d bytes, %v", len(got), err)
			}
		})
	}
}

// killedWriter starts the test binary as a writer of size bytes to url, kills it
// (SIGKILL) once it has sent killAfter bytes, and returns how many it had sent.
func killedWriter(t *testing.T, srv *s3test.Server, url string, size, killAfter int) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), writerEnv+"="+url+" "+strconv.Itoa(size))
	cmd.Env = append(cmd.Env, srv.Env()...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sent := 0
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		n, err := strconv.Atoi(strings.TrimPrefix(lines.Text(), "sent "))
		if err != nil {
			continue
		}
		if sent = n; sent >= killAfter {
			break
		}
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	go io.Copy(io.Discard, out)
	err = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
		t.Fatalf("the writer was not killed: %v (sent %d bytes)", err, sent)
	}
	// The server has noticed the broken connection once it answers again.
	time.Sleep(200 * time.Millisecond)
	return sent
}

// writer puts a value of the size spec gives to the store spec names, through a
// transport that sends request bodies slowly and prints how much it has sent.
func writer(spec string) int {
	url, size, _ := strings.Cut(spec, " ")
	n, _ := strconv.Atoi(size)
	s, err := New(context.Background(), url, Options{
		Endpoint: os.Getenv("MANIFOLD_S3_ENDPOINT"), PartSize: MinPartSize, Concurrency: 1,
		HTTPClient: &http.Client{Transport: slow{}},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := s.Put(context.Background(), "train/model.json", bytes.Repeat([]byte("x"), n)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("done")
	return 0
}

// slow sends request bodies at most 64 KB at a time, 2 ms apart (about 30 MB/s
// at most), printing the bytes sent so far.
type slow struct{}

var bodySent atomic.Int64

func (slow) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil && req.ContentLength > 0 {
		req.Body = &slowBody{r: req.Body}
	}
	return http.DefaultTransport.RoundTrip(req)
}

type slowBody struct{ r io.ReadCloser }

func (b *slowBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p[:min(len(p), 64<<10)])
	if n > 0 {
		time.Sleep(2 * time.Millisecond)
		fmt.Printf("sent %d\n", bodySent.Add(int64(n)))
	}
	return n, err
}

func (b *slowBody) Close() error { return b.r.Close() }

// TestBucketRegion: without a configured region, the store asks S3 where the
// bucket is, as AWS answers: a redirect carrying X-Amz-Bucket-Region.
func TestBucketRegion(t *testing.T) {
	for _, env := range []string{"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE"} {
		t.Setenv(env, "")
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	var asked []string
	client := roundTrip(func(req *http.Request) (*http.Response, error) {
		asked = append(asked, req.Method+" "+req.URL.Host+req.URL.Path)
		h := http.Header{"X-Amz-Bucket-Region": {"eu-west-1"}}
		return &http.Response{StatusCode: http.StatusMovedPermanently, Header: h, Body: io.NopCloser(strings.NewReader("")), Request: req}, nil
	})
	s, err := New(context.Background(), "s3://ml-artifacts/flows", Options{HTTPClient: &http.Client{Transport: client}})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.client.Options().Region; got != "eu-west-1" {
		t.Errorf("region %q, want eu-west-1", got)
	}
	if len(asked) != 1 || !strings.HasPrefix(asked[0], "HEAD ml-artifacts.s3.") {
		t.Errorf("requests %q, want one HeadBucket", asked)
	}

	missing := roundTrip(func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusNotFound, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("")), Request: req}, nil
	})
	_, err = New(context.Background(), "s3://no-such-bucket", Options{HTTPClient: &http.Client{Transport: missing}})
	if err == nil || !strings.Contains(err.Error(), "bucket no-such-bucket does not exist") {
		t.Errorf("New of a missing bucket: %v", err)
	}
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

func TestParseURL(t *testing.T) {
	for _, tc := range []struct{ url, bucket, prefix string }{
		{"s3://b", "b", ""},
		{"s3://b/", "b", ""},
		{"s3://b/p/q/", "b", "p/q"},
	} {
		b, p, err := ParseURL(tc.url)
		if err != nil || b != tc.bucket || p != tc.prefix {
			t.Errorf("ParseURL(%q) = %q, %q, %v", tc.url, b, p, err)
		}
	}
	for _, bad := range []string{"", "s3://", "s3:///p", "gs://b/p", "/data"} {
		if _, _, err := ParseURL(bad); err == nil {
			t.Errorf("ParseURL(%q) succeeded", bad)
		}
	}
	for _, bad := range []string{"minio:9000", "ftp://x", "http://", "http://h/?q=1", "http://u:endpass-42@minio:9000"} {
		if err := CheckEndpoint(bad); err == nil {
			t.Errorf("CheckEndpoint(%q) succeeded", bad)
		} else if strings.Contains(err.Error(), "endpass-42") {
			t.Errorf("CheckEndpoint(%q) = %v: prints the password", bad, err)
		}
	}
}

// TestList lists what a step put, as Dir does: its own artifacts with their
// sizes, not its items', another step's whose name starts the same, or other
// objects.
func TestList(t *testing.T) {
	s, bucket, srv := newStore(t, "flows/hello/run-1", Options{})
	ctx := context.Background()
	for key, data := range map[string]string{
		"train/model.json":   `{"w": [1, 2, 3]}`,
		"train/metrics.json": `{}`,
		"train/0/part.json":  `1`,
		"training/x.json":    `2`,
	} {
		if err := s.Put(ctx, key, []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := srv.Client().PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(bucket), Key: aws.String("flows/hello/run-1/train/notes.txt"), Body: strings.NewReader("x"),
	}); err != nil {
		t.Fatal(err)
	}
	got, err := s.List(ctx, "train")
	if err != nil {
		t.Fatal(err)
	}
	want := []artifact.Entry{{Key: "train/metrics.json", Size: 2}, {Key: "train/model.json", Size: 16}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("List(train) (-want +got):\n%s", diff)
	}
	if got, err := s.List(ctx, "train/0"); err != nil || !cmp.Equal(got, []artifact.Entry{{Key: "train/0/part.json", Size: 1}}) {
		t.Errorf("List(train/0) = %v, %v", got, err)
	}
	if got, err := s.List(ctx, "never"); err != nil || len(got) != 0 {
		t.Errorf("List(never) = %v, %v; want nothing", got, err)
	}
	if _, err := s.List(ctx, "../train"); err == nil {
		t.Error("List(../train): no error")
	}
}
