package kubeclient

import (
	"context"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Mapper finds the resource of a kind from what the API server serves, as
// client-go's deferred discovery RESTMapper does: it asks for a group
// version's resources the first time one of its kinds is mapped and keeps
// them until Reset (after a CRD adds kinds).
type Mapper struct {
	c  *Clientset
	mu sync.Mutex
	// served holds each group version asked for: its resources, or nil when
	// the API server does not serve it.
	served map[schema.GroupVersion]*metav1.APIResourceList
}

// NewMapper returns a Mapper that asks c.
func NewMapper(c *Clientset) *Mapper {
	return &Mapper{c: c, served: map[schema.GroupVersion]*metav1.APIResourceList{}}
}

// Reset forgets what the API server served.
func (m *Mapper) Reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.served)
}

// RESTMapping returns the resource of kind gk in the first of versions the
// API server serves it in, or a meta.NoKindMatchError (meta.IsNoMatchError)
// when it serves it in none of them. At least one version must be given.
func (m *Mapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, v := range versions {
		gv := schema.GroupVersion{Group: gk.Group, Version: v}
		list, ok := m.served[gv]
		if !ok {
			var err error
			list, err = m.c.ServerResourcesForGroupVersion(context.Background(), gv.String())
			if apierrors.IsNotFound(err) {
				list, err = nil, nil
			}
			if err != nil {
				return nil, err
			}
			m.served[gv] = list
		}
		if list == nil {
			continue
		}
		for _, r := range list.APIResources {
			if r.Kind != gk.Kind || strings.Contains(r.Name, "/") {
				continue
			}
			scope := meta.RESTScopeRoot
			if r.Namespaced {
				scope = meta.RESTScopeNamespace
			}
			return &meta.RESTMapping{Resource: gv.WithResource(r.Name), GroupVersionKind: gk.WithVersion(v), Scope: scope}, nil
		}
	}
	return nil, &meta.NoKindMatchError{GroupKind: gk, SearchedVersions: versions}
}
