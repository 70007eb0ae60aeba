package kubeclient_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/manifoldflow/manifold/internal/kubeclient"
)

// TestNoTokenToAnotherOrigin: an API server (or a proxy before it) that
// redirects a request to another origin does not get the kubeconfig's token
// sent there, by the typed clients nor the dynamic one.
func TestNoTokenToAnotherOrigin(t *testing.T) {
	var mu sync.Mutex
	var leaked []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if a := r.Header.Get("Authorization"); a != "" {
			leaked = append(leaked, r.URL.Path+": "+a)
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Success","major":"1","minor":"37"}`))
	}))
	defer other.Close()
	for _, code := range []int{301, 302, 307, 308} {
		for _, tls := range []bool{false, true} {
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, other.URL+r.URL.Path, code)
			})
			var srv *httptest.Server
			if tls {
				srv = httptest.NewTLSServer(h)
			} else {
				srv = httptest.NewServer(h)
			}
			rc := &rest.Config{Host: srv.URL, BearerToken: "kube-token-42"}
			if tls {
				rc.TLSClientConfig.Insecure = true
			}
			cs, err := kubeclient.NewForConfig(rc)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cs.ServerVersion(t.Context()); err == nil || !strings.Contains(err.Error(), other.URL) {
				t.Errorf("%d from %s: ServerVersion = %v; want the redirect to %s refused", code, srv.URL, err, other.URL)
			}
			if err := cs.CoreV1().Namespaces().Delete(t.Context(), "x", metav1.DeleteOptions{}); err == nil {
				t.Errorf("%d from %s: a DELETE redirected to %s was followed", code, srv.URL, other.URL)
			}
			dyn, err := kubeclient.NewDynamic(rc)
			if err != nil {
				t.Fatal(err)
			}
			gvr := schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}
			if _, err := dyn.Resource(gvr).Namespace("d").Get(t.Context(), "j", metav1.GetOptions{}); err == nil {
				t.Errorf("%d from %s: a dynamic GET redirected to %s was followed", code, srv.URL, other.URL)
			}
			srv.Close()
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(leaked) > 0 {
		t.Errorf("the other origin got the token: %q", leaked)
	}
}
