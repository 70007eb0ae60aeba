package kube

import (
	"context"
	"errors"
	"fmt"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/manifoldflow/manifold/placement"
	"github.com/manifoldflow/manifold/plan"
)

// resourceClaimTemplateGVR is the resource of the ResourceClaimTemplates a run
// creates for its sdk.DRA steps.
var resourceClaimTemplateGVR = schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "resourceclaimtemplates"}

// errDRAForbidden is what inventory returns, wrapped, when RBAC refuses to list
// DeviceClasses or ResourceSlices.
var errDRAForbidden = errors.New("DRA objects forbidden")

// inventory lists the cluster's DeviceClasses and ResourceSlices, and sorts their
// devices by node and class (placement.NewInventory).
func (c *cluster) inventory(ctx context.Context) (*placement.Inventory, error) {
	forbidden := func(what string) error {
		return fmt.Errorf("%w: RBAC on the cluster at %s (context %s) does not let this user list %s, which checking where DRA steps can run needs: ask a cluster admin for a ClusterRole granting list on deviceclasses and resourceslices (resource.k8s.io)", errDRAForbidden, c.Host, c.Context, what)
	}
	classes, err := c.Client.ResourceV1().DeviceClasses().List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsForbidden(err):
		return nil, forbidden("deviceclasses")
	case apierrors.IsNotFound(err):
		classes = &resourcev1.DeviceClassList{} // no resource.k8s.io/v1: no classes
	case err != nil:
		return nil, fmt.Errorf("listing the DeviceClasses of the cluster at %s: %w", c.Host, err)
	}
	slices, err := c.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsForbidden(err):
		return nil, forbidden("resourceslices")
	case apierrors.IsNotFound(err):
		slices = &resourcev1.ResourceSliceList{}
	case err != nil:
		return nil, fmt.Errorf("listing the ResourceSlices of the cluster at %s: %w", c.Host, err)
	}
	return placement.NewInventory(classes.Items, slices.Items), nil
}

// installedClaims marks unplaceable, in r, each step that claims from an
// installed ResourceClaimTemplate (sdk.Claim) its namespace lacks: its pods
// would never be scheduled. A user who may not read the templates is not told
// either way; the pods will say.
func (c *cluster) installedClaims(ctx context.Context, f *plan.Flow, r *placement.Report) error {
	for i := range f.Steps {
		s := &f.Steps[i]
		if s.DRA == nil {
			continue
		}
		ns := s.Namespace
		if ns == "" {
			ns = c.Namespace
		}
		missing, err := c.missingTemplates(ctx, s, ns)
		if err != nil {
			return err
		}
		if len(missing) == 0 {
			continue
		}
		r.Refuse(i, fmt.Sprintf("it claims from the ResourceClaimTemplate %s (sdk.Claim), which namespace %s does not have: install it there, or run in the namespace that has it", strings.Join(missing, ", "), ns))
	}
	return nil
}

// claimTemplatesExist checks that every installed ResourceClaimTemplate a step
// claims from (sdk.Claim) exists in the namespace of the step's pods: a pod whose
// template does not exist is never scheduled.
func (c *cluster) claimTemplatesExist(ctx context.Context, units []*unit) error {
	seen := map[string]bool{}
	for _, u := range units {
		if u.Step.DRA == nil || seen[u.ns+"/"+u.Step.Name] {
			continue
		}
		seen[u.ns+"/"+u.Step.Name] = true // the units of a foreach step share its templates
		missing, err := c.missingTemplates(ctx, u.Step, u.ns)
		if err != nil {
			return err
		}
		if len(missing) > 0 {
			return fmt.Errorf("step %s claims from the ResourceClaimTemplate %s (sdk.Claim), which does not exist in namespace %s on the cluster at %s: ask the platform team to install it there, or run in the namespace that has it (--namespace)", u.Step.Name, strings.Join(missing, ", "), u.ns, c.Host)
		}
	}
	return nil
}

// missingTemplates returns the installed ResourceClaimTemplates step s claims
// from (sdk.Claim) that namespace ns lacks. A template this user may not read
// is not reported: the pods will say if it is missing.
func (c *cluster) missingTemplates(ctx context.Context, s *plan.Step, ns string) ([]string, error) {
	var missing []string
	for _, name := range s.DRA.Templates {
		_, err := c.Client.ResourceV1().ResourceClaimTemplates(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			missing = append(missing, name)
		case apierrors.IsForbidden(err):
		case err != nil:
			return nil, fmt.Errorf("ResourceClaimTemplate %s of step %s: %w", name, s.Name, err)
		}
	}
	return missing, nil
}
