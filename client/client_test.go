package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/manifoldflow/manifold/artifact"
	"github.com/manifoldflow/manifold/cli"
	"github.com/manifoldflow/manifold/client"
	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/harness/s3test"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/local"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/sdk"
)

// The local runtime starts Run steps as `<program> step NAME`; here the program
// is this test binary started under the flow's name, which TestMain turns into
// the flow's program.
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == readerFlow.Name() {
		cli.Main(readerFlow)
	}
	code := m.Run()
	s3test.StopShared()
	os.Exit(code)
}

type Config struct {
	LR     float64 `json:"lr"`
	Layers []int   `json:"layers"`
}

type Score struct {
	Item  string `json:"item"`
	Index int    `json:"index"`
	Value int64  `json:"value"`
}

type Model struct {
	Config Config  `json:"config"`
	Scores []Score `json:"scores"`
	Tries  int     `json:"tries"`
}

var items = []string{"alpha", "beta", "gamma"}

// readerFlow puts an artifact in each step: prepare a config, fan a score per
// foreach item, flaky (which fails twice before it succeeds) its number of
// tries, and train a model made of all of them.
var readerFlow = sdk.NewFlow("reader", sdk.Image("registry.example.com/reader:v1")).
	Step("prepare", sdk.Run(func(ctx *sdk.Context) error {
		fmt.Println("preparing")
		return ctx.Put("config", Config{LR: 0.25, Layers: []int{4, 8}})
	})).
	Step("fan", sdk.After("prepare"), sdk.Foreach(items...), sdk.Run(func(ctx *sdk.Context) error {
		fmt.Printf("scoring %s\n", ctx.Item())
		// A value beyond float64's exact integers shows that decoding keeps it.
		return ctx.Put("score", Score{Item: ctx.Item(), Index: ctx.Index(), Value: 1<<60 + int64(ctx.Index())})
	})).
	Step("flaky", sdk.After("prepare"), sdk.Retry(2), sdk.RetryBackoff(10*time.Millisecond), sdk.Run(func(ctx *sdk.Context) error {
		var tries int
		_ = ctx.Get("flaky", "tries", &tries)
		tries++
		if err := ctx.Put("tries", tries); err != nil {
			return err
		}
		fmt.Printf("attempt %d\n", tries)
		if tries < 3 {
			fmt.Fprintf(os.Stderr, "boom %d\n", tries)
			return fmt.Errorf("try %d fails", tries)
		}
		return nil
	})).
	Step("train", sdk.After("fan", "flaky"), sdk.Run(func(ctx *sdk.Context) error {
		var m Model
		if err := ctx.Get("prepare", "config", &m.Config); err != nil {
			return err
		}
		for i := range items {
			var s Score
			if err := ctx.GetIndex("fan", i, "score", &s); err != nil {
				return err
			}
			m.Scores = append(m.Scores, s)
		}
		if err := ctx.Get("flaky", "tries", &m.Tries); err != nil {
			return err
		}
		return ctx.Put("model", m)
	}))

// wantModel is what train puts, from what the other steps put.
var wantModel = Model{
	Config: Config{LR: 0.25, Layers: []int{4, 8}},
	Scores: []Score{{"alpha", 0, 1 << 60}, {"beta", 1, 1<<60 + 1}, {"gamma", 2, 1<<60 + 2}},
	Tries:  3,
}

// runLocal runs readerFlow with the local runtime under a fresh root and returns
// the root and the run's ID.
func runLocal(t *testing.T) (string, string) {
	t.Helper()
	p, errs := compile.Compile(readerFlow, compile.Options{})
	if len(errs) > 0 {
		t.Fatalf("compile: %v", errs)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	var out bytes.Buffer
	res, err := local.Run(context.Background(), p, local.Options{
		Root: root, Program: exe, Arg0: p.Name, MaxParallel: 4, KillGrace: 500 * time.Millisecond, Stdout: &out, Stderr: &out,
	})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	return root, res.ID
}

// TestLocalRun reads back a run of the local runtime: its steps, items,
// attempts, logs and artifacts, from its run directory.
func TestLocalRun(t *testing.T) {
	root, id := runLocal(t)
	c := client.Open(root)
	runs, err := c.Runs("reader")
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].ID != id {
		t.Fatalf("Runs = %d runs, want run %s", len(runs), id)
	}
	if others, err := c.Runs("other"); err != nil || len(others) != 0 {
		t.Errorf("Runs(other) = %d runs, %v; want none", len(others), err)
	}
	r, err := c.Latest("reader")
	if err != nil {
		t.Fatal(err)
	}
	if r.ID != id || r.State != record.Succeeded || r.Flow != "reader" {
		t.Fatalf("Latest = run %s of %s, %s; want run %s of reader, succeeded", r.ID, r.Flow, r.State, id)
	}
	checkRun(t, r, true)
	checkArtifacts(t, r, artifact.Dir(r.Dir).Location(""))
}

// checkRun checks what the record says of a run of readerFlow; perAttempt says
// whether its logs mark each attempt's output (the local runtime's do).
func checkRun(t *testing.T, r *client.Run, perAttempt bool) {
	t.Helper()
	var names []string
	for _, s := range r.Steps() {
		names = append(names, s.Name)
		if s.State() != record.Succeeded {
			t.Errorf("step %s: %s, want succeeded", s.Name, s.State())
		}
	}
	if diff := cmp.Diff([]string{"prepare", "fan", "flaky", "train"}, names); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}

	fan := r.Step("fan")
	if fan.Items != len(items) || len(fan.Tasks()) != len(items) {
		t.Fatalf("fan: %d items, %d tasks; want %d", fan.Items, len(fan.Tasks()), len(items))
	}
	for i, item := range items {
		task := fan.Item(i)
		if err := task.Err(); err != nil {
			t.Fatal(err)
		}
		if task.Item != item || *task.Index != i || task.State != record.Succeeded || task.Start.IsZero() || task.End.Before(task.Start) {
			t.Errorf("fan item %d: %+v, want item %s succeeded, with its times", i, task.Task, item)
		}
		out, err := task.Stdout()
		if err != nil || string(out) != "scoring "+item+"\n" {
			t.Errorf("fan item %d: stdout %q, %v; want its line", i, out, err)
		}
	}

	flaky := r.Step("flaky").Task()
	as, err := flaky.Attempts()
	if err != nil {
		t.Fatal(err)
	}
	if len(as) != 3 {
		t.Fatalf("flaky: %d attempts, want 3", len(as))
	}
	for i, a := range as {
		want := record.Failed
		if i == 2 {
			want = record.Succeeded
		}
		if a.N != i+1 || a.State != want {
			t.Errorf("flaky attempt %d: number %d, %s; want %s", i+1, a.N, a.State, want)
		}
		if !perAttempt {
			continue
		}
		if got, want := string(a.Stdout), fmt.Sprintf("attempt %d\n", i+1); got != want {
			t.Errorf("flaky attempt %d: stdout %q, want %q", i+1, got, want)
		}
		wantErr := fmt.Sprintf("boom %d\n", i+1)
		if i == 2 {
			wantErr = ""
		}
		if got := string(a.Stderr); !strings.HasPrefix(got, wantErr) || (wantErr == "") != (got == "") {
			t.Errorf("flaky attempt %d: stderr %q, want it to start with %q", i+1, got, wantErr)
		}
		if a.Start.IsZero() {
			t.Errorf("flaky attempt %d: no start time", i+1)
		}
	}
	if last := as[2]; last.ExitCode == nil || *last.ExitCode != 0 || last.Error != "" || !last.End.Equal(flaky.End) {
		t.Errorf("flaky's last attempt: %+v, want exit 0 at the task's end", last)
	}
	if out, err := flaky.Stdout(); err != nil || !strings.Contains(string(out), "attempt 1\n") || !strings.Contains(string(out), "attempt 3\n") {
		t.Errorf("flaky's stdout.log = %q, %v; want every attempt's output", out, err)
	}
	if got, want := flaky.StdoutPath(), filepath.Join(r.Dir, "_steps", "flaky", "stdout.log"); got != want {
		t.Errorf("StdoutPath = %s, want %s", got, want)
	}
}

// checkArtifacts reads every artifact of a run of readerFlow back, from store
// location where.
func checkArtifacts(t *testing.T, r *client.Run, where string) {
	t.Helper()
	ctx := context.Background()
	store, err := r.Store(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if store.Location("") != where {
		t.Errorf("store at %s, want %s", store.Location(""), where)
	}

	model, err := client.Artifact[Model](ctx, r, "train", "model")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantModel, model); diff != "" {
		t.Errorf("model (-want +got):\n%s", diff)
	}
	var cfg Config
	if err := r.Step("prepare").Artifact(ctx, "config", &cfg); err != nil || !cmp.Equal(cfg, wantModel.Config) {
		t.Errorf("config = %+v, %v; want %+v", cfg, err, wantModel.Config)
	}
	for i := range items {
		s, err := client.ItemArtifact[Score](ctx, r, "fan", i, "score")
		if err != nil || s != wantModel.Scores[i] {
			t.Errorf("score of item %d = %+v, %v; want %+v", i, s, err, wantModel.Scores[i])
		}
	}

	// The listing is what the steps put, in flow order, with each one's size.
	list, err := r.Artifacts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Step  string
		Index int
		Name  string
	}
	var rows []row
	for _, a := range list {
		rows = append(rows, row{a.Step, a.Index, a.Name})
		data, err := store.Get(ctx, artifact.Key(a.Step, a.Index, a.Name))
		if err != nil || int64(len(data)) != a.Size || a.Size == 0 {
			t.Errorf("%s/%d/%s: size %d, stored %d bytes (%v)", a.Step, a.Index, a.Name, a.Size, len(data), err)
		}
		if a.Location != store.Location(artifact.Key(a.Step, a.Index, a.Name)) {
			t.Errorf("%s/%d/%s: location %s", a.Step, a.Index, a.Name, a.Location)
		}
	}
	want := []row{{"prepare", -1, "config"}, {"fan", 0, "score"}, {"fan", 1, "score"}, {"fan", 2, "score"}, {"flaky", -1, "tries"}, {"train", -1, "model"}}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("artifacts (-want +got):\n%s", diff)
	}

	// What is not there is named, with what is.
	for _, tt := range []struct {
		err  error
		want []string
	}{
		{r.Step("trian").Artifact(ctx, "model", new(Model)), []string{"run " + r.ID, `no step "trian"`, "prepare, fan, flaky, train"}},
		{r.Step("train").Artifact(ctx, "modle", new(Model)), []string{"run " + r.ID, "step train", `no artifact "modle"`, "it has model"}},
		{r.Step("fan").Item(1).Artifact(ctx, "scores", new(Score)), []string{"item 1 of step fan", `no artifact "scores"`, "it has score"}},
		{r.Step("fan").Item(3).Artifact(ctx, "score", new(Score)), []string{"step fan has 3 foreach items (0 to 2), not item 3"}},
		{r.Step("fan").Artifact(ctx, "score", new(Score)), []string{"step fan has 3 foreach items", "Item"}},
		{r.Step("train").Item(0).Artifact(ctx, "model", new(Model)), []string{"step train has no foreach items"}},
		{r.Step("train").Artifact(ctx, "model", new(int)), []string{"run " + r.ID, `artifact "model" of step "train"`, "cannot unmarshal"}},
	} {
		if tt.err == nil {
			t.Errorf("no error, want one saying %q", tt.want)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(tt.err.Error(), w) {
				t.Errorf("error %q lacks %q", tt.err, w)
			}
		}
	}
	if _, err := r.Step("fan").Item(-1).Attempts(); err == nil {
		t.Error("Item(-1).Attempts: no error")
	}
}

// asCluster makes the local run id under root read as a cluster run that kept
// its artifacts in store (nil: none), with the run directory's own artifacts
// removed, so that only the store can give them.
func asCluster(t *testing.T, root, id string, store *record.Artifacts) {
	t.Helper()
	dir := filepath.Join(root, id)
	rec, err := record.ReadRecord(dir)
	if err != nil {
		t.Fatal(err)
	}
	rec.Runtime, rec.Namespace, rec.As, rec.Artifacts = "kube", "ml", "job", store
	if err := record.WriteRecord(dir, *rec); err != nil {
		t.Fatal(err)
	}
	for _, s := range rec.Steps {
		if err := os.RemoveAll(filepath.Join(dir, s.Name)); err != nil {
			t.Fatal(err)
		}
	}
}

// runAsPods runs each step of readerFlow's run id as its pod does, through the
// step command with the environment every pod of a flow with an artifact store
// gets (store is MANIFOLD_ARTIFACT_STORE), retrying a step that fails as its
// Job does.
func runAsPods(t *testing.T, store, id string) {
	t.Helper()
	t.Setenv(plan.EnvArtifactStore, store)
	t.Setenv(plan.EnvRunID, id)
	for _, d := range readerFlow.Spec().Steps {
		n := max(len(d.Spec.Foreach), 1)
		for i := range n {
			if d.Spec.Foreach != nil {
				t.Setenv(plan.EnvItem, d.Spec.Foreach[i])
				t.Setenv(plan.EnvIndex, strconv.Itoa(i))
			}
			for try := 1; ; try++ {
				var stdout, stderr bytes.Buffer
				code := cli.Run(context.Background(), readerFlow, []string{"reader", "step", d.Name}, &stdout, &stderr)
				if code == cli.ExitOK {
					break
				}
				if try > 3 {
					t.Fatalf("step %s[%d]: exit status %d:\n%s", d.Name, i, code, stderr.String())
				}
			}
		}
	}
}

// TestS3Store reads a cluster run's artifacts from the S3 store its record
// names, as its pods wrote them there.
func TestS3Store(t *testing.T) {
	server := s3test.Shared(t)
	server.SetEnv(t)
	bucket := "client-reader"
	server.Bucket(t, bucket)
	root, id := runLocal(t)
	url := "s3://" + bucket + "/team/artifacts"
	runAsPods(t, url, id)
	// The client reaches the server through the endpoint the record names.
	t.Setenv(plan.EnvS3Endpoint, "")
	asCluster(t, root, id, &record.Artifacts{URL: url, Endpoint: server.Endpoint})

	r, err := client.Open(root).Run(id)
	if err != nil {
		t.Fatal(err)
	}
	checkRun(t, r, false)
	checkArtifacts(t, r, url+"/reader/"+id)

	// A store given to the client replaces the record's.
	r, err = client.Open(root, client.Store("s3://"+bucket+"/elsewhere"), client.Endpoint(server.Endpoint)).Run(id)
	if err != nil {
		t.Fatal(err)
	}
	var m Model
	err = r.Step("train").Artifact(context.Background(), "model", &m)
	if err == nil || !strings.Contains(err.Error(), `no artifact "model": it put none (in s3://`+bucket+"/elsewhere/reader/"+id+"/train)") {
		t.Errorf("reading from an empty store: %v, want it to say there is no model there", err)
	}
}

// TestVolumeStore reads a cluster run's artifacts from a volume store, a
// directory that every pod mounted and that is mounted here too.
func TestVolumeStore(t *testing.T) {
	root, id := runLocal(t)
	mount := t.TempDir()
	runAsPods(t, mount, id)
	asCluster(t, root, id, &record.Artifacts{URL: plan.ArtifactVolumePath, Claim: "shared-artifacts"})

	// Without the directory where the claim is mounted here, nothing is read.
	r, err := client.Open(root).Run(id)
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.Artifact[Model](context.Background(), r, "train", "model")
	if err == nil || !strings.Contains(err.Error(), "volume claim shared-artifacts") || !strings.Contains(err.Error(), "--store DIR") {
		t.Errorf("reading without the mount: %v, want it to name the claim and --store", err)
	}

	r, err = client.Open(root, client.Store(mount)).Run(id)
	if err != nil {
		t.Fatal(err)
	}
	checkRun(t, r, false)
	checkArtifacts(t, r, filepath.Join(mount, "reader", id))

	if r, err = client.Open(root, client.Store(filepath.Join(mount, "nowhere"))).Run(id); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Store(context.Background()); err == nil || !strings.Contains(err.Error(), "no directory") {
		t.Errorf("a store that is not there: %v, want it said", err)
	}
}

// TestClusterRunWithoutStore: a cluster run without an artifact store left its
// artifacts in its pods, and reading one says so.
func TestClusterRunWithoutStore(t *testing.T) {
	root, id := runLocal(t)
	asCluster(t, root, id, nil)
	r, err := client.Open(root).Run(id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Artifacts(context.Background()); err == nil || !strings.Contains(err.Error(), "without an artifact store") {
		t.Errorf("Artifacts: %v, want it to say the run had no store", err)
	}
}

func TestNoRuns(t *testing.T) {
	c := client.Open(filepath.Join(t.TempDir(), "none"))
	if _, err := c.Latest("reader"); err == nil || !strings.Contains(err.Error(), "no run of flow reader") {
		t.Errorf("Latest: %v", err)
	}
	if _, err := c.Run("20260101-000000-abcd"); err == nil {
		t.Error("Run of a missing run: no error")
	}
	if _, err := c.Run("../x"); err == nil || errors.Is(err, os.ErrNotExist) {
		t.Errorf("Run(../x): %v, want the ID refused", err)
	}
}

// TestJobSetItems: a cluster run as JobSets records a foreach step as one unit,
// and its items' artifacts are read by index all the same.
func TestJobSetItems(t *testing.T) {
	root, id := runLocal(t)
	mount := t.TempDir()
	runAsPods(t, mount, id)
	asCluster(t, root, id, &record.Artifacts{URL: plan.ArtifactVolumePath, Claim: "shared-artifacts"})
	dir := filepath.Join(root, id)
	rec, err := record.ReadRecord(dir)
	if err != nil {
		t.Fatal(err)
	}
	rec.As = "jobset"
	for i := range rec.Steps {
		if rec.Steps[i].Name == "fan" {
			rec.Steps[i].Items = 0
		}
	}
	if err := record.WriteRecord(dir, *rec); err != nil {
		t.Fatal(err)
	}
	if err := record.WriteTask(dir, record.Task{Step: "fan", State: record.Succeeded, Attempts: 1}); err != nil {
		t.Fatal(err)
	}
	r, err := client.Open(root, client.Store(mount)).Run(id)
	if err != nil {
		t.Fatal(err)
	}
	fan := r.Step("fan")
	if fan.Items != 0 || len(fan.Tasks()) != 1 || fan.State() != record.Succeeded {
		t.Fatalf("fan: %d items, %d tasks, %s; want the step as one unit", fan.Items, len(fan.Tasks()), fan.State())
	}
	for i := range items {
		s, err := client.ItemArtifact[Score](context.Background(), r, "fan", i, "score")
		if err != nil || s != wantModel.Scores[i] {
			t.Errorf("score of item %d = %+v, %v; want %+v", i, s, err, wantModel.Scores[i])
		}
	}
	if err := r.Step("fan").Item(-1).Err(); err == nil {
		t.Error("Item(-1): no error")
	}
}
