package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	"sigs.k8s.io/jobset/pkg/webhooks"
	"sigs.k8s.io/yaml"
)

// JobSet's own admission webhooks, registered on a mux and called in process: the
// defaulting and validation a cluster running the JobSet controller applies.
const (
	jobSetDefaultPath  = "/mutate-jobset-x-k8s-io-v1alpha2-jobset"
	jobSetValidatePath = "/validate-jobset-x-k8s-io-v1alpha2-jobset"
)

var (
	jobSetOnce sync.Once
	jobSetMux  *http.ServeMux
	jobSetErr  error
)

// jobSetWebhooks sets up JobSet's webhooks once. The manager never starts and never
// reaches its (unused) API server address.
func jobSetWebhooks() (*http.ServeMux, error) {
	jobSetOnce.Do(func() {
		scheme := runtime.NewScheme()
		if jobSetErr = clientgoscheme.AddToScheme(scheme); jobSetErr != nil {
			return
		}
		if jobSetErr = jobsetv1.AddToScheme(scheme); jobSetErr != nil {
			return
		}
		mux := http.NewServeMux()
		var mgr ctrl.Manager
		mgr, jobSetErr = ctrl.NewManager(&rest.Config{Host: "https://127.0.0.1:1"}, ctrl.Options{
			Scheme:                 scheme,
			Metrics:                metricsserver.Options{BindAddress: "0"},
			HealthProbeBindAddress: "0",
			WebhookServer:          webhook.NewServer(webhook.Options{WebhookMux: mux}),
		})
		if jobSetErr != nil {
			return
		}
		jobSetErr = webhooks.Setup(mgr)
		jobSetMux = mux
	})
	return jobSetMux, jobSetErr
}

// jobSetKind is the JobSet API this validator knows the webhooks of.
var jobSetKind = jobsetv1.GroupVersion.WithKind("JobSet")

// validateJobSet decodes a JobSet strictly into the JobSet API types, runs it through
// the custom resource create path with JobSet's webhooks, then checks each Job it
// would create with the API server's Job rules.
func validateJobSet(doc []byte, cr customResource) []string {
	var js jobsetv1.JobSet
	if err := yaml.UnmarshalStrict(doc, &js); err != nil {
		return []string{"decode: " + err.Error()}
	}
	what := "JobSet " + js.Name
	mux, err := jobSetWebhooks()
	if err != nil {
		return []string{what + ": JobSet webhooks: " + err.Error()}
	}
	mutate := func(raw []byte) ([]byte, []string) {
		resp, err := review(mux, jobSetDefaultPath, &js, raw)
		if err != nil {
			return raw, []string{what + ": defaulting webhook: " + err.Error()}
		}
		problems := denied(what+": defaulting webhook", resp)
		if len(resp.Patch) == 0 {
			return raw, problems
		}
		patch, err := jsonpatch.DecodePatch(resp.Patch)
		if err == nil {
			raw, err = patch.Apply(raw)
		}
		if err != nil {
			problems = append(problems, what+": applying the defaulting webhook's patch: "+err.Error())
		}
		return raw, problems
	}
	check := func(raw []byte) ([]byte, []string) {
		resp, err := review(mux, jobSetValidatePath, &js, raw)
		if err != nil {
			return raw, []string{what + ": validating webhook: " + err.Error()}
		}
		return raw, denied(what+": validating webhook", resp)
	}
	problems := validateCustomResource(doc, jobSetKind, cr, mutate, check)

	// The Jobs JobSet makes from each replicated job: name <jobset>-<replicated job>-<i>.
	for _, rj := range js.Spec.ReplicatedJobs {
		for i := range max(rj.Replicas, 1) {
			j := batchv1.Job{
				TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
				ObjectMeta: rj.Template.ObjectMeta,
				Spec:       rj.Template.Spec,
			}
			j.Name = fmt.Sprintf("%s-%s-%d", js.Name, rj.Name, i)
			j.Namespace = js.Namespace
			data, err := json.Marshal(&j)
			if err != nil {
				problems = append(problems, what+": "+err.Error())
				continue
			}
			for _, p := range validate(data) {
				problems = append(problems, fmt.Sprintf("%s: replicated job %s: %s", what, rj.Name, p))
			}
		}
	}
	return problems
}

// review sends a create AdmissionReview for js (as raw) to the webhook at path.
func review(mux *http.ServeMux, path string, js *jobsetv1.JobSet, raw []byte) (*admissionv1.AdmissionResponse, error) {
	namespace := js.Namespace
	if namespace == "" {
		namespace = "default"
	}
	in := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       types.UID("manifold-kubevalidate"),
			Kind:      metav1.GroupVersionKind{Group: jobsetv1.GroupVersion.Group, Version: jobsetv1.GroupVersion.Version, Kind: "JobSet"},
			Resource:  metav1.GroupVersionResource{Group: jobsetv1.GroupVersion.Group, Version: jobsetv1.GroupVersion.Version, Resource: "jobsets"},
			Name:      js.Name,
			Namespace: namespace,
			Operation: admissionv1.Create,
			Object:    runtime.RawExtension{Raw: raw},
		},
	}
	body, err := json.Marshal(&in)
	if err != nil {
		return nil, err
	}
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		return nil, fmt.Errorf("HTTP %d: %s", rec.Code, rec.Body.String())
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		return nil, err
	}
	if out.Response == nil {
		return nil, fmt.Errorf("no response")
	}
	return out.Response, nil
}

// denied returns the problems of a webhook's answer: a refusal, and any warning.
func denied(what string, resp *admissionv1.AdmissionResponse) []string {
	var problems []string
	if !resp.Allowed {
		msg := "denied"
		if resp.Result != nil {
			msg = resp.Result.Message
		}
		problems = append(problems, what+": "+msg)
	}
	for _, w := range resp.Warnings {
		problems = append(problems, what+": warning: "+w)
	}
	return problems
}
