package local

import (
	"fmt"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/catalog"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/display"
)

// Ignored returns what f asks that a local run does not provide: one note per step
// ("train asks 16 Trainium devices and 8 EFA: ignored locally"; a multi-node step
// runs once, as one node), and those requests as errors, which a strict run refuses. Secrets the step
// reads are noted too: locally their variables come from this environment.
func Ignored(f *plan.Flow) (notes []string, refused field.ErrorList) {
	for i := range f.Steps {
		s := &f.Steps[i]
		at := field.NewPath("steps").Key(s.Name)
		var asks []string
		ask := func(path *field.Path, what string) {
			asks = append(asks, what)
			refused = append(refused, field.Forbidden(path, what+": a local run has no accelerators; run without --strict to ignore the request, or run on a cluster"))
		}
		if s.Neuron > 0 {
			model, option := neuronModel(s.InstanceType), "trainium"
			if strings.HasPrefix(model, "Inferentia") {
				option = "inferentia"
			}
			ask(at.Child(option), display.Count(s.Neuron, model+" device"))
		}
		if s.GPU > 0 {
			ask(at.Child("gpu"), display.Count(s.GPU, gpuVendor(s.GPUResource)+" GPU"))
		}
		if s.EFA > 0 {
			ask(at.Child("efa"), fmt.Sprintf("%d EFA", s.EFA))
		}
		for _, q := range s.Limits {
			switch q.Name {
			case plan.ResourceNeuron, plan.ResourceEFA, plan.ResourceNVIDIA, plan.ResourceAMD:
				continue
			}
			if strings.Contains(q.Name, "/") {
				ask(at.Child("resources").Key(q.Name), q.Value+" "+q.Name)
			}
		}
		if len(asks) > 0 {
			notes = append(notes, s.Name+" asks "+and(asks)+": ignored locally")
		}
		if s.Nodes > 1 {
			notes = append(notes, fmt.Sprintf("%s asks %d nodes: runs once, as a single node, locally", s.Name, s.Nodes))
			refused = append(refused, field.Forbidden(at.Child("nodes"), fmt.Sprintf(
				"%d nodes: a local run has one node; run without --strict to run the step once, or run on a cluster", s.Nodes)))
		}
		var missing []string
		for _, e := range s.Env {
			if e.SecretName == "" {
				continue
			}
			if _, ok := os.LookupEnv(e.Name); !ok {
				missing = append(missing, e.Name+" (secret "+e.SecretName+")")
			}
		}
		if len(missing) > 0 {
			notes = append(notes, s.Name+" reads "+and(missing)+": secrets are not read locally; set the variables in this environment to pass them")
		}
		if len(s.Secrets) > 0 {
			notes = append(notes, s.Name+" takes every variable of secret "+and(s.Secrets)+": secrets are not read locally; set the variables in this environment to pass them")
		}
	}
	if a := f.Artifacts; a != nil {
		store := a.URL
		if a.Claim != "" {
			store = "volume " + a.Claim
		}
		notes = append(notes, "artifacts are kept in the run directory here; the artifact store ("+store+") is for runs on a cluster")
	}
	return notes, refused
}

// neuronModel names the Neuron devices of an instance type ("Trainium",
// "Inferentia2"), or "Neuron" when the step names no known type.
func neuronModel(instanceType string) string {
	if i, ok := catalog.Lookup(instanceType); ok && i.Accelerator == catalog.Neuron {
		return i.Model
	}
	return "Neuron"
}

func gpuVendor(resource string) string {
	if resource == plan.ResourceAMD {
		return "AMD"
	}
	return "NVIDIA"
}

// and joins "a", "a and b", "a, b and c".
func and(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}
