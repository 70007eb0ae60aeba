package kube_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/harness/testflows"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/kube"
	"github.com/manifoldflow/manifold/sdk"
)

// refused runs p with o, which the cluster's admission must refuse before
// anything is created: it returns the refusals, and fails t when the run
// recorded or left anything labelled with its run ID.
func refused(t *testing.T, c *simcluster.Cluster, ns string, p *plan.Flow, o kube.Options) []kube.Refusal {
	t.Helper()
	o.RunID = "refused"
	res, err := kube.Run(context.Background(), p, o)
	var re *kube.RefusedError
	if res != nil || !errors.As(err, &re) {
		t.Fatalf("run: result %v, error %v; want a RefusedError and no result", res, err)
	}
	t.Logf("the run's error:\n%v", err)
	if entries, _ := os.ReadDir(o.Root); len(entries) > 0 {
		t.Errorf("a refused run recorded %d entries", len(entries))
	}
	if left := labelled(t, c, ns, o.RunID); len(left) > 0 {
		t.Errorf("a refused run left %v", left)
	}
	jobs, err := c.Client.BatchV1().Jobs(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil || len(jobs.Items) > 0 {
		t.Errorf("a refused run created %d Jobs (%v)", len(jobs.Items), err)
	}
	return re.Refusals
}

// byStep returns the refusals of step, failing t unless there is one.
func byStep(t *testing.T, refusals []kube.Refusal, step string) kube.Refusal {
	t.Helper()
	var found []kube.Refusal
	for _, r := range refusals {
		if r.Step == step {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d refusals of step %s in %v; want 1", len(found), step, refusals)
	}
	return found[0]
}

// wantRefusal checks that refusal r of a pod names by, the field and a message
// holding msg, all on one line.
func wantRefusal(t *testing.T, r kube.Refusal, object, by, field, msg string) {
	t.Helper()
	if !strings.HasPrefix(r.Object, object) || r.By != by || !strings.Contains(r.Field, field) || !strings.Contains(r.Message, msg) || r.Todo == "" {
		t.Errorf("refusal %+v; want of the %s, by %q, field %q, a message with %q and what to do", r, object, by, field, msg)
	}
	if line := r.String(); strings.Contains(line, "\n") || !strings.HasPrefix(line, "step "+r.Label+": "+by+" refuses its ") {
		t.Errorf("refusal %q: want one line that names the step and what refused it", line)
	}
}

// checkRefuses checks that check reports step as refused, for a reason that
// holds by.
func checkRefuses(t *testing.T, p *plan.Flow, o kube.Options, step, by string) {
	t.Helper()
	report, err := kube.Check(context.Background(), p, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range report.Steps {
		if s.Step == step {
			if s.OK || !strings.Contains(s.Reason, by) {
				t.Errorf("check of step %s: ok %t, reason %q; want it refused by %s", step, s.OK, s.Reason, by)
			}
			return
		}
	}
	t.Errorf("check reports no step %s", step)
}

// TestDryRunPodSecurity: a Job whose pods the namespace's Pod Security level
// forbids is accepted, then makes no pods. The dry run of each step's pod finds
// it before anything is created, with --no-check too. The restricted level
// takes a Run step on the flow's own image and a step given a user, and refuses
// a step on another image that may run as root (saying which option makes it
// restricted), EFA wiring's IPC_LOCK capability and a step in the host's
// network (both need the privileged level); the baseline level refuses the
// last two, and takes a plain step.
func TestDryRunPodSecurity(t *testing.T) {
	c := simcluster.Shared(t)
	const enforce = "pod-security.kubernetes.io/enforce"

	t.Run("restricted", func(t *testing.T) {
		ns := c.LabelledNamespace(t, map[string]string{enforce: "restricted"})
		run := func(*sdk.Context) error { return nil }
		p := compileFlow(t, sdk.NewFlow("dry-restricted", sdk.Image("example.com/flow:v1")).
			Step("own", sdk.Run(run)).
			Step("user", sdk.Image("busybox:1.37"), sdk.Command("true"), sdk.RunAsUser(65532)).
			Step("root", sdk.Image("busybox:1.37"), sdk.Command("true")).
			Step("net", sdk.Run(run), sdk.HostNetwork(true)).
			Step("efa", sdk.Run(run), sdk.EFA(1), sdk.EFAWiring()))
		o := options(c, ns, t.TempDir())
		o.NoCheck = true // no node has EFA: the dry run is made all the same
		refusals := refused(t, c, ns, p, o)
		if len(refusals) != 3 {
			t.Errorf("%d refusals; want those of root, net and efa: %v", len(refusals), refusals)
		}
		by := enforce + "=restricted of namespace " + ns
		root := byStep(t, refusals, "root")
		wantRefusal(t, root, "pod", by, "securityContext.runAsNonRoot", `violates PodSecurity "restricted:latest"`)
		if !strings.Contains(root.Todo, "sdk.RunAsUser") {
			t.Errorf("refusal of a step that may run as root: %q; want it to name sdk.RunAsUser", root.String())
		}
		wantRefusal(t, byStep(t, refusals, "net"), "pod", by, "spec.hostNetwork", "host namespaces")
		efa := byStep(t, refusals, "efa")
		wantRefusal(t, efa, "pod", by, "securityContext.capabilities.add", "IPC_LOCK")
		if !strings.Contains(efa.Todo, "sdk.EFAWiring") || !strings.Contains(efa.Todo, "privileged level") {
			t.Errorf("refusal of EFA wiring: %q; want it to name sdk.EFAWiring and the privileged level", efa.String())
		}
		checkRefuses(t, p, o, "root", by)
		checkRefuses(t, p, o, "efa", by)
	})

	t.Run("baseline", func(t *testing.T) {
		ns := c.LabelledNamespace(t, map[string]string{enforce: "baseline"})
		p := compileFlow(t, sdk.NewFlow("dry-baseline", sdk.Image("example.com/flow:v1")).
			Step("plain", sdk.Command("true")).
			Step("net", sdk.Command("true"), sdk.HostNetwork(true)).
			Step("efa", sdk.Command("true"), sdk.EFA(1), sdk.EFAWiring()))
		o := options(c, ns, t.TempDir())
		o.NoCheck = true // no node has EFA: the dry run is made all the same
		refusals := refused(t, c, ns, p, o)
		if len(refusals) != 2 {
			t.Errorf("%d refusals; want those of net and efa: %v", len(refusals), refusals)
		}
		by := enforce + "=baseline of namespace " + ns
		wantRefusal(t, byStep(t, refusals, "net"), "pod", by, "spec.hostNetwork", "host namespaces")
		wantRefusal(t, byStep(t, refusals, "efa"), "pod", by, "securityContext.capabilities.add", "IPC_LOCK")
		checkRefuses(t, p, o, "net", by)
	})

	// A step in a Kueue queue is created suspended: its Job is accepted, and
	// its pods are judged only once Kueue admits it. The dry run of its pod
	// answers before.
	t.Run("kueue", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), simcluster.StartTimeout)
		defer cancel()
		if err := c.StartKueue(ctx); err != nil {
			t.Fatal(err)
		}
		ns := c.LabelledNamespace(t, map[string]string{enforce: "baseline", simcluster.LabelKueue: "true"})
		c.KueueQueue(t, ns, "training", gangQuota)
		p := compileFlow(t, sdk.NewFlow("dry-kueue", sdk.Image("example.com/flow:v1"), sdk.Queue("training")).
			Step("net", sdk.Command("true"), sdk.HostNetwork(true)))
		for _, as := range []string{kube.AsJob, kube.AsJobSet} {
			o := options(c, ns, t.TempDir())
			o.As = as
			r := byStep(t, refused(t, c, ns, p, o), "net")
			wantRefusal(t, r, "pod of "+kindOf(as), enforce+"=baseline of namespace "+ns, "spec.hostNetwork", "host namespaces")
		}
	})
}

// kindOf is the kind a run as as creates.
func kindOf(as string) string {
	if as == kube.AsJobSet {
		return "JobSet"
	}
	return "Job"
}

// untilRefused dry-runs a pod asking for memory in namespace ns until the
// cluster refuses it with a message holding want: admission learns of a new
// LimitRange, quota or webhook configuration a moment after it is made.
func untilRefused(t *testing.T, c *simcluster.Cluster, ns, memory, want string) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "example.com/probe:v1", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse(memory)},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(memory)},
		}}}},
	}
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil && strings.Contains(err.Error(), want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("admission in namespace %s does not refuse a pod of %s memory with %q yet: %v", ns, memory, want, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestDryRunLimitRangeAndQuota: a LimitRange whose maximum is under a step's
// memory refuses its pod, and the refusal names it; a ResourceQuota of CPU
// requests refuses a step that states none, and one that states it and fits is
// not refused: a flow of such steps runs.
func TestDryRunLimitRangeAndQuota(t *testing.T) {
	c := simcluster.Shared(t)
	ns := c.Namespace(t)
	ctx := context.Background()
	lr := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "mem-max"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
		Type: corev1.LimitTypeContainer, Max: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
	}}}}
	if _, err := c.Client.CoreV1().LimitRanges(ns).Create(ctx, lr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "room"}, Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
		corev1.ResourceRequestsCPU: resource.MustParse("4"), corev1.ResourceRequestsMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("10"),
	}}}
	if _, err := c.Client.CoreV1().ResourceQuotas(ns).Create(ctx, q, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	untilRefused(t, c, ns, "2Gi", "maximum memory usage per Container is 1Gi")
	untilQuotaCounted(t, c, ns, "room")

	// A quota of requests.cpu wants every pod to state one.
	o := options(c, ns, t.TempDir())
	p := compileFlow(t, sdk.NewFlow("dry-nocpu", sdk.Image("example.com/flow:v1")).Step("nocpu", sdk.Command("true"), sdk.Memory("256Mi")))
	wantRefusal(t, byStep(t, refused(t, c, ns, p, o), "nocpu"), "pod", "the ResourceQuota room of namespace "+ns, "resources.requests.cpu", "must specify requests.cpu")

	steps := func(f *sdk.Flow) *sdk.Flow {
		return f.Step("small", sdk.Command("true"), sdk.CPU("100m"), sdk.Memory("256Mi")).
			Step("fan", sdk.Command("true"), sdk.CPU("100m"), sdk.Memory("512Mi"), sdk.Foreach("a", "b"), sdk.After("small"))
	}
	p = compileFlow(t, steps(sdk.NewFlow("dry-limits", sdk.Image("example.com/flow:v1"))).
		Step("big", sdk.Command("true"), sdk.CPU("100m"), sdk.Memory("2Gi")))
	refusals := refused(t, c, ns, p, o)
	if len(refusals) != 1 {
		t.Errorf("%d refusals; want that of big alone (the quota holds every step): %v", len(refusals), refusals)
	}
	wantRefusal(t, byStep(t, refusals, "big"), "pod", "the LimitRange mem-max of namespace "+ns, "resources.limits.memory", "maximum memory usage per Container is 1Gi, but limit is 2Gi")
	checkRefuses(t, p, o, "big", "the LimitRange mem-max")

	// The steps the LimitRange allows fit in the quota: the run goes on and
	// succeeds.
	p = compileFlow(t, steps(sdk.NewFlow("dry-quota", sdk.Image("example.com/flow:v1"))))
	if r := runFlow(t, ctx, p, options(c, ns, t.TempDir())); r.err != nil {
		t.Fatalf("a run the quota holds: %v", r.err)
	}
}

// untilQuotaCounted waits until the quota controller has counted ResourceQuota
// name of namespace ns: until then, quota admission refuses every pod.
func untilQuotaCounted(t *testing.T, c *simcluster.Cluster, ns, name string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		q, err := c.Client.CoreV1().ResourceQuotas(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err == nil && len(q.Status.Hard) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ResourceQuota %s is not counted: %v", name, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// denyImages is a validating webhook that refuses every pod whose image is not
// from registry.internal, as a platform team's policy might, naming the field;
// it records whether each request it saw was a dry run.
type denyImages struct {
	mu     sync.Mutex
	dryRun []bool
}

func (d *denyImages) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	var pod corev1.Pod
	_ = json.Unmarshal(review.Request.Object.Raw, &pod)
	d.mu.Lock()
	d.dryRun = append(d.dryRun, review.Request.DryRun != nil && *review.Request.DryRun)
	d.mu.Unlock()
	resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	if len(pod.Spec.Containers) > 0 && !strings.HasPrefix(pod.Spec.Containers[0].Image, "registry.internal/") {
		resp.Allowed = false
		resp.Result = &metav1.Status{
			Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden,
			Message: "images must come from registry.internal",
			Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{
				Type: metav1.CauseTypeFieldValueNotSupported, Field: "spec.containers[0].image", Message: "not from registry.internal",
			}}},
		}
	}
	review.Response, review.Request = resp, nil
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(review)
}

// TestDryRunWebhook: a user's validating webhook that refuses the pods (not the
// Jobs) of a step: the Job alone would be accepted and make no pods. The dry run
// of the step's pod is refused, with the webhook's name and the field it names,
// and only dry runs reach the webhook; check reports the same.
func TestDryRunWebhook(t *testing.T) {
	c := simcluster.Shared(t)
	ns := c.Namespace(t)
	ctx := context.Background()
	hook := &denyImages{}
	srv := httptest.NewTLSServer(hook) // on 127.0.0.1, with a self-signed certificate for it
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	none, fail := admissionregistrationv1.SideEffectClassNone, admissionregistrationv1.Fail
	timeout := int32(5)
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "images-" + ns},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:         "images.manifold.test",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: new(srv.URL), CABundle: ca},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
			}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			SideEffects:             &none,
			FailurePolicy:           &fail,
			TimeoutSeconds:          &timeout,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	hooks := c.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	if _, err := hooks.Create(ctx, cfg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hooks.Delete(context.Background(), cfg.Name, metav1.DeleteOptions{}) })
	untilRefused(t, c, ns, "64Mi", `admission webhook "images.manifold.test" denied the request`)
	hook.mu.Lock()
	hook.dryRun = nil
	hook.mu.Unlock()

	p := compileFlow(t, sdk.NewFlow("dry-webhook", sdk.Image("example.com/flow:v1")).Step("only", sdk.Command("true")))
	o := options(c, ns, t.TempDir())
	r := byStep(t, refused(t, c, ns, p, o), "only")
	wantRefusal(t, r, "pod", "the admission webhook images.manifold.test", "spec.containers[0].image", "images must come from registry.internal")
	checkRefuses(t, p, o, "only", "the admission webhook images.manifold.test")

	hook.mu.Lock()
	defer hook.mu.Unlock()
	if len(hook.dryRun) == 0 {
		t.Fatal("the webhook saw no request")
	}
	for i, dry := range hook.dryRun {
		if !dry {
			t.Errorf("request %d to the webhook was not a dry run", i)
		}
	}
}

// BenchmarkDryRun measures the dry run a run makes before creating anything, on
// the simulated cluster: for a chain of 1,000 steps (a Job and a pod each, every
// one its own shape) and for one step of 1,000 foreach items (of one shape).
func BenchmarkDryRun(b *testing.B) {
	c := simcluster.Shared(b)
	ns := c.Namespace(b)
	items := make([]string, 1000)
	for i := range items {
		items[i] = "item-" + strconv.Itoa(i)
	}
	for _, bc := range []struct {
		name string
		f    *sdk.Flow
	}{
		{"chain-1000", testflows.Chain(1000)},
		{"foreach-1000", sdk.NewFlow("fan", sdk.Image("example.com/flow:v1")).Step("fan", sdk.Command("true"), sdk.Foreach(items...))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p := compileFlow(b, bc.f)
			o := options(c, ns, b.TempDir())
			requests := 0
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				refusals, _, n, err := kube.DryRun(context.Background(), p, o)
				if err != nil || len(refusals) > 0 {
					b.Fatalf("dry run: %v, %v", refusals, err)
				}
				requests = n
			}
			b.StopTimer()
			per := float64(b.Elapsed().Microseconds()) / 1000 / float64(b.N)
			b.ReportMetric(per, "ms/dry-run")
			b.ReportMetric(float64(requests), "requests/dry-run")
			b.ReportMetric(per/float64(len(p.Steps)*max(1, len(p.Steps[0].Foreach))), "ms/unit")
		})
	}
}

// TestDryRunWithoutPods: a user whom RBAC lets create Jobs but not pods (the Job
// controller makes them) cannot dry-run the steps' pods, nor delete them at its
// end: the run says so, dry-runs its Jobs, runs, and leaves its pods to the
// garbage collector.
func TestDryRunWithoutPods(t *testing.T) {
	c := simcluster.Shared(t)
	ns := c.Namespace(t)
	ctx := context.Background()
	if _, err := c.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "jobs-only"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "jobs-only"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods", "pods/log"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"list"}},
		{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"create", "list", "watch", "delete", "deletecollection"}},
	}}
	if _, err := c.Client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "jobs-only"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "jobs-only"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "jobs-only", Namespace: ns}},
	}
	if _, err := c.Client.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tok, err := c.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "jobs-only", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	o := options(c, ns, t.TempDir())
	o.Kubeconfig = writeKubeconfig(t, c.Config.Host, c.Config.CAData, tok.Status.Token)
	o.NoCheck = true // nor may it list nodes
	p := compileFlow(t, sdk.NewFlow("dry-nopods", sdk.Image("example.com/flow:v1")).Step("only", sdk.Command("true")))
	r := runFlow(t, ctx, p, o)
	if r.err != nil {
		t.Fatalf("run: %v", r.err)
	}
	want := "this user may not create pods in namespace " + ns + " (to dry-run each step's pod (dryRun=All; nothing is created)): the steps' pods are not dry-run"
	if got := strings.Count(r.out.String(), want); got != 1 {
		t.Errorf("the run says %d times %q; want once", got, want)
	}
	// Nor may it delete pods itself: the cleanup leaves them to the garbage
	// collector, says so once at the start, and waits for them.
	want = "this user may not deletecollection pods in namespace " + ns + " (to delete the run's pods at once when it ends, after their Jobs): the run's end waits for the garbage collector"
	if got := strings.Count(r.out.String(), want); got != 1 || strings.Contains(r.out.String(), "deleting the run's pods") {
		t.Errorf("the run says %d times %q (want once), or that deleting its pods failed", got, want)
	}
	if len(r.res.Left) > 0 {
		t.Errorf("left on the cluster: %v", r.res.Left)
	}
}
