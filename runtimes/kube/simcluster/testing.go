package simcluster

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// StartTimeout bounds a cluster's start in tests.
const StartTimeout = 5 * time.Minute

// StartT starts a cluster for test t alone and stops it when t ends, printing the
// processes' logs if t failed. Missing tools fail t with how to build them.
func StartT(t testing.TB, o Options) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	c, err := Start(ctx, o)
	if err != nil {
		t.Fatalf("simulated cluster: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("simulated cluster logs:\n%s", c.LogTails(100))
		}
		c.Stop()
	})
	return c
}

var shared struct {
	once sync.Once
	c    *Cluster
	err  error
}

// Shared returns the one cluster of this test binary, starting it on first use,
// so the tests of a package share one start. The package's TestMain must call
// Main, which stops it. Missing tools fail t with how to build them.
func Shared(t testing.TB) *Cluster {
	t.Helper()
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
		defer cancel()
		shared.c, shared.err = Start(ctx, Options{})
	})
	if shared.err != nil {
		t.Fatalf("simulated cluster: %v", shared.err)
	}
	if err := shared.c.Exited(); err != nil {
		t.Fatalf("simulated cluster: %v", err)
	}
	return shared.c
}

// Main runs the tests of m, then stops the shared cluster if one was started,
// printing its processes' logs when a test failed. Use it as
// `func TestMain(m *testing.M) { os.Exit(simcluster.Main(m)) }`.
func Main(m *testing.M) int {
	code := m.Run()
	if c := shared.c; c != nil {
		if code != 0 {
			fmt.Fprintf(os.Stderr, "simulated cluster logs:\n%s", c.LogTails(100))
		}
		c.Stop()
	}
	return code
}

// Namespace creates a namespace of its own for t, waits until pods can be
// created in it, and deletes it when t ends.
func (c *Cluster) Namespace(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	ns, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "t-"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() {
		_ = c.Client.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	if err := c.WaitServiceAccount(ctx, ns.Name); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}
