package kube

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestRequestKind: each request is counted under the verb the API server's
// audit log gives it and the resource it is made to.
func TestRequestKind(t *testing.T) {
	for _, tc := range []struct {
		method, url string
		want        Request
	}{
		{"GET", "/api/v1/namespaces/ns/pods?labelSelector=a%3Db", Request{"list", "pods"}},
		{"GET", "/api/v1/namespaces/ns/pods?watch=true&labelSelector=a%3Db", Request{"watch", "pods"}},
		{"GET", "/api/v1/namespaces/ns/pods/p-1/log?follow=true", Request{"get", "pods/log"}},
		{"GET", "/api/v1/namespaces/ns", Request{"get", "namespaces"}},
		{"GET", "/api/v1/nodes", Request{"list", "nodes"}},
		{"POST", "/apis/batch/v1/namespaces/ns/jobs?fieldValidation=Strict", Request{"create", "jobs"}},
		{"POST", "/apis/batch/v1/namespaces/ns/jobs?dryRun=All", Request{"create (dry run)", "jobs"}},
		{"DELETE", "/apis/batch/v1/namespaces/ns/jobs/j", Request{"delete", "jobs"}},
		{"DELETE", "/apis/batch/v1/namespaces/ns/jobs?labelSelector=x", Request{"deletecollection", "jobs"}},
		{"PATCH", "/apis/jobset.x-k8s.io/v1alpha2/namespaces/ns/jobsets/s/status", Request{"patch", "jobsets/status"}},
		{"PUT", "/apis/batch/v1/namespaces/ns/jobs/j", Request{"update", "jobs"}},
		{"POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", Request{"create", "selfsubjectaccessreviews"}},
		{"GET", "/version", Request{"get", "/version"}},
		{"GET", "/apis/batch/v1", Request{"get", "/apis/batch/v1"}},
	} {
		if got := requestKind(httptest.NewRequest(tc.method, tc.url, nil)); got != tc.want {
			t.Errorf("%s %s: %v, want %v", tc.method, tc.url, got, tc.want)
		}
	}
}

// TestRequestsCount: the counting transport counts every request it sends on,
// and String lists the kinds most first.
func TestRequestsCount(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	reqs := &Requests{}
	client := &http.Client{Transport: counting{http.DefaultTransport, reqs}}
	for _, path := range []string{"/api/v1/namespaces/ns/pods", "/api/v1/namespaces/ns/pods", "/apis/batch/v1/namespaces/ns/jobs"} {
		resp, err := client.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if got, want := reqs.String(), "2 list pods, 1 list jobs"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if reqs.Total() != 3 {
		t.Errorf("Total() = %d, want 3", reqs.Total())
	}
}
