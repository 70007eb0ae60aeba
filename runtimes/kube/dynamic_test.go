package kube_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/harness/benchenv"
	"github.com/manifoldflow/manifold/harness/s3test"
	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/dag"
	"github.com/manifoldflow/manifold/runtimes/kube"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/sdk"
)

// dynamicFlow fans process out over list's shards, then branches on pick's
// size, and joins in report. Its steps are commands that kwok completes: the
// values they would put are put in the store by the test.
func dynamicFlow() *sdk.Flow {
	return sdk.NewFlow("dyn", sdk.Image("example.com/flow:v1")).
		Step("list", sdk.Command("list")).
		Step("process", sdk.Command("process"), sdk.ForeachOf("list", "shards")).
		Step("pick", sdk.Command("pick"), sdk.After("process")).
		Step("large", sdk.Command("large"), sdk.When("pick", "size", "large")).
		Step("small", sdk.Command("small"), sdk.When("pick", "size", "small")).
		Step("report", sdk.Command("report"), sdk.After("large", "small"))
}

// TestDynamicRun runs dynamicFlow with run --kube, its artifact store an S3
// bucket (on loopback) in which the values of list and pick are put before the
// run: the runner reads list's shards once list has succeeded, and runs
// process's items as one Indexed Job of that many completions, each pod told
// the number of items, with the items, any JSON value, in its ConfigMap as
// their text; it reads pick's size, runs large, and records small as not
// taken, with the value it found; report runs after large alone. Over an
// empty list, process runs no item and succeeds, and the rest goes on.
func TestDynamicRun(t *testing.T) {
	c := simcluster.Shared(t)
	srv := s3test.Start(t)
	srv.SetEnv(t)
	for _, tc := range []struct {
		name, shards string
		items        []string
	}{
		{"three", `["a", {"k": "v"}, 3]`, []string{"a", `{"k":"v"}`, "3"}},
		{"none", `[]`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := c.Namespace(t)
			bucket := "dyn-" + tc.name
			srv.Bucket(t, bucket)
			p, errs := compile.Compile(dynamicFlow(), compile.Options{Artifacts: "s3://" + bucket + "/flows", ArtifactsEndpoint: srv.Endpoint})
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			id := "dyn-" + tc.name
			for key, value := range map[string]string{"list/shards.json": tc.shards, "pick/size.json": `"large"`} {
				if _, err := srv.Client().PutObject(context.Background(), &s3.PutObjectInput{
					Bucket: aws.String(bucket), Key: aws.String("flows/dyn/" + id + "/" + key), Body: strings.NewReader(value),
				}); err != nil {
					t.Fatal(err)
				}
			}
			o := options(c, ns, t.TempDir())
			o.RunID, o.Keep = id, true
			r := runFlow(t, context.Background(), p, o)
			if r.err != nil {
				t.Fatalf("run: %v", r.err)
			}
			for i := range tc.items {
				label := "process[" + string(rune('0'+i)) + "]"
				if task := r.tasks[label]; task.State != record.Succeeded || task.Item != tc.items[i] {
					t.Errorf("%s: %s, item %q; want succeeded, item %q", label, task.State, task.Item, tc.items[i])
				}
			}
			if tc.items == nil && r.rec.Steps[1].Items != 0 {
				t.Errorf("process recorded %d items; want none", r.rec.Steps[1].Items)
			}
			for _, l := range []string{"list", "pick", "large", "report"} {
				if task := r.tasks[l]; task.State != record.Succeeded {
					t.Errorf("%s: %s; want succeeded", l, task.State)
				}
			}
			small := r.tasks["small"]
			if small.State != record.Skipped || small.Reason != dag.NotTaken ||
				small.Error != `not taken: pick's size is "large", and small runs when it is "small"` {
				t.Errorf("small: %s (%s) %q; want skipped, not taken, with pick's size", small.State, small.Reason, small.Error)
			}

			sel := metav1.ListOptions{LabelSelector: plan.LabelRun + "=" + id + "," + plan.LabelStep + "=process"}
			jobs, err := c.Client.BatchV1().Jobs(ns).List(context.Background(), sel)
			if err != nil {
				t.Fatal(err)
			}
			cms, err := c.Client.CoreV1().ConfigMaps(ns).List(context.Background(), sel)
			if err != nil {
				t.Fatal(err)
			}
			if tc.items == nil {
				if len(jobs.Items)+len(cms.Items) != 0 {
					t.Errorf("process over no item made %d Jobs and %d ConfigMaps; want none", len(jobs.Items), len(cms.Items))
				}
				return
			}
			if len(jobs.Items) != 1 || len(cms.Items) != 1 {
				t.Fatalf("process made %d Jobs and %d ConfigMaps; want one of each", len(jobs.Items), len(cms.Items))
			}
			j := jobs.Items[0]
			if *j.Spec.Completions != int32(len(tc.items)) {
				t.Errorf("process's Job has %d completions; want %d", *j.Spec.Completions, len(tc.items))
			}
			for i, want := range tc.items {
				if got := cms.Items[0].Data[string(rune('0'+i))]; got != want {
					t.Errorf("item %d in the ConfigMap is %q; want %q", i, got, want)
				}
			}
			env := j.Spec.Template.Spec.Containers[0].Env
			if !slices.ContainsFunc(env, func(e corev1.EnvVar) bool { return e.Name == plan.EnvCount && e.Value == "3" }) {
				t.Errorf("process's pods are not told %s=3: %+v", plan.EnvCount, env)
			}
			if left := labelled(t, c, ns, id); len(left) == 0 {
				t.Errorf("a kept run left nothing")
			}
		})
	}
}

// TestDynamicResumeAfterFailedItem: a dynamic fan-out whose item 1 fails for
// good (kwok fails the pod of completion index 1, and the step has no retry)
// fails the run, which leaves its one Indexed Job with that index failed.
// Resumed, the run deletes that Job and its ConfigMap, does not run items 0
// and 2 again, runs item 1 as a Job of its own (whose pod has no completion
// index, and succeeds), then the join, and succeeds.
func TestDynamicResumeAfterFailedItem(t *testing.T) {
	c := simcluster.Shared(t)
	srv := s3test.Start(t)
	srv.SetEnv(t)
	ns := c.Namespace(t)
	const bucket, id = "dyn-resume", "dyn-resume"
	srv.Bucket(t, bucket)
	f := sdk.NewFlow("dyn", sdk.Image("example.com/flow:v1")).
		Step("list", sdk.Command("list")).
		Step("process", sdk.Command("process"), sdk.ForeachOf("list", "shards"), sdk.Label(simcluster.LabelFailIndexOne, "true")).
		Step("report", sdk.Command("report"), sdk.After("process"))
	p, errs := compile.Compile(f, compile.Options{Artifacts: "s3://" + bucket + "/flows", ArtifactsEndpoint: srv.Endpoint})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	ctx := context.Background()
	if _, err := srv.Client().PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(bucket), Key: aws.String("flows/dyn/" + id + "/list/shards.json"), Body: strings.NewReader(`["a", "b", "c"]`),
	}); err != nil {
		t.Fatal(err)
	}
	o := options(c, ns, t.TempDir())
	o.RunID = id
	r := runFlow(t, ctx, p, o)
	if r.err == nil || r.res == nil || r.res.State != record.Failed {
		t.Fatalf("run: %v, result %+v; want it failed", r.err, r.res)
	}
	for label, want := range map[string]record.State{"process[0]": record.Succeeded, "process[1]": record.Failed, "process[2]": record.Succeeded} {
		if task := r.tasks[label]; task.State != want {
			t.Errorf("%s: %s (%s); want %s", label, task.State, task.Error, want)
		}
	}
	sel := metav1.ListOptions{LabelSelector: plan.LabelRun + "=" + id + "," + plan.LabelStep + "=process"}
	jobs, err := c.Client.BatchV1().Jobs(ns).List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs.Items) != 1 || ptr.Deref(jobs.Items[0].Status.FailedIndexes, "") != "1" {
		t.Fatalf("the failed run left %d Jobs of process (%+v); want its one Indexed Job, index 1 failed", len(jobs.Items), jobs.Items)
	}
	fanOut := jobs.Items[0].UID

	o.Keep = true
	r = runFlow(t, ctx, p, o)
	if r.err != nil {
		t.Fatalf("resumed run: %v", r.err)
	}
	for _, l := range []string{"list", "process[0]", "process[1]", "process[2]", "report"} {
		if task := r.tasks[l]; task.State != record.Succeeded {
			t.Errorf("%s: %s (%s); want succeeded", l, task.State, task.Error)
		}
	}
	for _, l := range []string{"process[0]", "process[2]"} {
		if !strings.Contains(r.out.String(), l+": succeeded in an earlier attempt of this run: not run again") {
			t.Errorf("the resumed run does not say that %s is not run again", l)
		}
	}
	jobs, err = c.Client.BatchV1().Jobs(ns).List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs.Items) != 1 || jobs.Items[0].UID == fanOut || jobs.Items[0].Spec.Completions == nil || *jobs.Items[0].Spec.Completions != 1 {
		t.Fatalf("after the resumed run, process has %d Jobs; want item 1's own Job of one completion, not the fan-out's", len(jobs.Items))
	}
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + jobs.Items[0].Name})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 || !slices.ContainsFunc(pods.Items[0].Spec.Containers[0].Env, func(e corev1.EnvVar) bool { return e.Name == plan.EnvItem && e.Value == "b" }) {
		t.Errorf("item 1's Job has %d pods; want one, told its item b", len(pods.Items))
	}
	cms, err := c.Client.CoreV1().ConfigMaps(ns).List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	if len(cms.Items) != 0 {
		t.Errorf("the fan-out's ConfigMap is left after the resumed run: %d", len(cms.Items))
	}
}

// TestDynamicRunNeedsS3: a dynamic flow without a store, with a volume
// store, or run as JobSets is refused before anything is made, naming the
// step and what to do.
func TestDynamicRunNeedsS3(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    compile.Options
		as   string
		want string
	}{
		{"no-store", compile.Options{}, kube.AsJob, `steps[process].foreachOf: Forbidden: run --kube reads list's shards from the run's artifact store once list has put it, and the flow has none: set artifacts = "s3://bucket/prefix" in manifold.toml, or pass --artifacts s3://bucket/prefix`},
		{"volume", compile.Options{Artifacts: "pvc://team"}, kube.AsJob, `steps[process].foreachOf: Forbidden: run --kube reads list's shards from the run's artifact store once list has put it, and a volume claim (team) is read only in the cluster's pods, not on this machine: use an S3 store (artifacts = "s3://bucket/prefix")`},
		{"jobset", compile.Options{Artifacts: "s3://bucket-b/p"}, kube.AsJobSet, `steps[process].foreachOf: Forbidden: run --kube --as jobset does not run a step that fans out over or branches on a value found at run time: run the flow as Jobs (leave out --as jobset)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, errs := compile.Compile(dynamicFlow(), tc.o)
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			_, err := kube.Run(context.Background(), p, kube.Options{Kubeconfig: "/nonexistent", As: tc.as})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "steps[large].when") {
				t.Errorf("run: %v\nwant it to hold %s, and to name steps[large].when", err, tc.want)
			}
		})
	}
}

// BenchmarkDynamicFanOut runs, with run --kube on the simulated cluster's kwok
// nodes, dynamicFlow over a list found at run time of MANIFOLD_BENCH_ITEMS
// items (1,000 unless set), put in the S3 store before the run as list would
// put it: the runner reads it once list has succeeded and runs process's
// items as one Indexed Job. It reports the wall time of the run (the dry run
// and the cleanup included), items a second, the runner's peak memory and
// its requests to the API server: the figures beside Argo's and Airflow's
// for the same fan-out (docs/flows.md).
//
//	MANIFOLD_BENCH_ITEMS=1000 go test -run '^$' -bench DynamicFanOut -benchtime 1x -timeout 30m ./runtimes/kube
func BenchmarkDynamicFanOut(b *testing.B) {
	items := benchenv.Int(b, "MANIFOLD_BENCH_ITEMS", 1000, 0)
	c := simcluster.Shared(b)
	srv := s3test.Start(b)
	srv.SetEnv(b)
	ns := c.Namespace(b)
	srv.Bucket(b, "dyn-bench")
	p, errs := compile.Compile(dynamicFlow(), compile.Options{Artifacts: "s3://dyn-bench/flows", ArtifactsEndpoint: srv.Endpoint})
	if len(errs) > 0 {
		b.Fatal(errs)
	}
	list := make([]string, items)
	for i := range list {
		list[i] = strconv.Itoa(i)
	}
	shards := "[" + strings.Join(list, ",") + "]"
	var wall time.Duration
	var peak memPeak
	reqs := &kube.Requests{}
	for i := 0; b.Loop(); i++ {
		id := fmt.Sprintf("dyn-bench-%d-%d", time.Now().UnixNano(), i)
		for key, value := range map[string]string{"list/shards.json": shards, "pick/size.json": `"large"`} {
			if _, err := srv.Client().PutObject(context.Background(), &s3.PutObjectInput{
				Bucket: aws.String("dyn-bench"), Key: aws.String("flows/dyn/" + id + "/" + key), Body: strings.NewReader(value),
			}); err != nil {
				b.Fatal(err)
			}
		}
		o := options(c, ns, b.TempDir())
		o.RunID, o.Requests = id, reqs
		o.CleanupTimeout = 10 * time.Minute
		stop := samplePeak(&peak)
		start := time.Now()
		_, err := kube.Run(context.Background(), p, o)
		wall += time.Since(start)
		stop()
		if err != nil {
			b.Fatal(err)
		}
		rec, _, err := record.Read(o.Root, id)
		if err != nil {
			b.Fatal(err)
		}
		if rec.State != record.Succeeded || rec.Steps[1].Items != items {
			b.Fatalf("run %s: %s, process over %d items; want succeeded over %d", id, rec.State, rec.Steps[1].Items, items)
		}
	}
	runs := float64(b.N)
	b.ReportMetric(wall.Seconds()/runs, "s/run")
	b.ReportMetric(float64(items)*runs/wall.Seconds(), "items/s")
	b.ReportMetric(float64(peak.heap)/(1<<20), "MiB-peak-heap")
	b.ReportMetric(float64(peak.total)/(1<<20), "MiB-peak-total")
	b.ReportMetric(float64(reqs.Total())/runs, "requests")
}
