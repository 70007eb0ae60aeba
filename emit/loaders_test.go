package emit_test

import (
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/emit/airflow"
	"github.com/manifoldflow/manifold/emit/argo"
	"github.com/manifoldflow/manifold/emit/encode"
	"github.com/manifoldflow/manifold/emit/job"
	"github.com/manifoldflow/manifold/emit/jobset"
	"github.com/manifoldflow/manifold/harness/exampletest"
	"github.com/manifoldflow/manifold/harness/yamlload"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

// loaderValues are the strings TestEveryLoaderReadsTheSameManifests places in
// a flow: every special scalar and control character, and what the fuzz
// corpora of the module hold (FuzzYAMLMatchesYAMLv2's seeds and every
// testdata/fuzz directory).
func loaderValues(t *testing.T) []string {
	values := slices.Concat(yamlload.Special, yamlload.Controls(), yamlload.Tricky)
	for _, dir := range []string{"emit", "compile"} {
		values = append(values, yamlload.Corpus(t, filepath.Join(exampletest.Root(), dir))...)
	}
	slices.Sort(values)
	return slices.Compact(values)
}

// loaderFlow places s in a param's default, a command's argument, an env
// value, an annotation and a foreach item; with names, also in a label's key
// and value, a node selector's value and the step's name, which only some
// strings can be.
func loaderFlow(s string, names bool) *sdk.Flow {
	step := "a"
	opts := []sdk.StepOption{sdk.Command("sh", "-c", "true", s), sdk.Env("VALUE", s),
		sdk.Annotation("example.com/note", s), sdk.Foreach(s)}
	if names {
		step = s
		opts = append(opts, sdk.Label("example.com/value", s), sdk.Label(s, "v"), sdk.NodeSelector("example.com/value", s))
	}
	return sdk.NewFlow("loaders", sdk.Image("busybox"), sdk.Param("p", s)).Step(step, opts...)
}

// objectTargets are the targets that write Kubernetes objects as YAML, with
// the objects they write.
var objectTargets = []struct {
	target  emit.Target
	objects func(*plan.Flow) ([]any, field.ErrorList)
}{
	{job.Target{}, job.Objects},
	{jobset.Target{}, jobset.Objects},
	{argo.Target{}, argoObjects},
}

// argoObjects are the argo target's objects in the order of its files: those of
// <flow>.argo.yaml, then the ConfigMap of <flow>.literals.yaml when it has one.
func argoObjects(p *plan.Flow) ([]any, field.ErrorList) {
	objs, errs := argo.Objects(p)
	if cm := argo.Literals(p); cm != nil && len(errs) == 0 {
		objs = append(objs, cm)
	}
	return objs, errs
}

// TestEveryLoaderReadsTheSameManifests: for every special scalar, control
// character and string of the fuzz corpora, placed wherever a flow can hold it,
// the job, jobset and argo targets' files load in Kubernetes (sigs.k8s.io/yaml),
// yaml.v3 and PyYAML (its Python parser and libyaml's) as the very objects the
// target wrote, and the airflow target's DAG holds the string as a literal that
// Python reads back.
func TestEveryLoaderReadsTheSameManifests(t *testing.T) {
	files := map[string][]byte{}
	want := map[string][]any{}
	literals := map[string][]string{}
	for i, s := range loaderValues(t) {
		p, errs := compile.Compile(loaderFlow(s, true), compile.Options{})
		if len(errs) > 0 {
			p, errs = compile.Compile(loaderFlow(s, false), compile.Options{})
		}
		if len(errs) > 0 {
			if utf8.ValidString(s) {
				t.Errorf("%q: the flow does not compile: %v", s, errs.ToAggregate())
			}
			continue // compile refuses what is not UTF-8, with a path
		}
		for _, ot := range objectTargets {
			objs, errs := ot.objects(p)
			if len(errs) > 0 {
				// Argo reads "{{" in an annotation as a tag, and the argo
				// target refuses it, naming the field (FuzzArgoTemplating).
				for _, e := range errs {
					if e.Type == field.ErrorTypeInternal {
						t.Errorf("%q: %s: %v", s, ot.target.Name(), e)
					}
				}
				continue
			}
			var docs []any
			for _, obj := range objs {
				data, err := encode.JSON(obj, "")
				if err != nil {
					t.Fatal(err)
				}
				doc, err := yamlload.JSON(data)
				if err != nil {
					t.Fatal(err)
				}
				docs = append(docs, doc)
			}
			out, errs := emit.Files(ot.target, p)
			if len(errs) > 0 {
				t.Fatalf("%q: %s: %v", s, ot.target.Name(), errs.ToAggregate())
			}
			// The documents of a target's YAML files, in order, are its objects.
			var all []byte
			for _, f := range out {
				if strings.HasSuffix(f.Name, ".yaml") {
					all = append(all, "---\n"...)
					all = append(all, f.Data...)
				}
			}
			name := fmt.Sprintf("%d %q.%s.yaml", i, s, ot.target.Name())
			files[name], want[name] = all, docs
		}
		out, errs := emit.Files(airflow.Target{}, p)
		if len(errs) > 0 {
			t.Fatalf("%q: airflow: %v", s, errs.ToAggregate())
		}
		for _, f := range out {
			if strings.HasSuffix(f.Name, ".py") {
				name := fmt.Sprintf("%d %q.py", i, s)
				files[name], literals[name] = f.Data, []string{s}
			}
		}
	}
	loaded := yamlload.All(t, files)
	for name, docs := range want {
		for _, loader := range yamlload.Loaders {
			r := loaded[name][loader]
			if r.Err != nil {
				t.Errorf("%s: %s refuses the file: %v", name, loader, r.Err)
				continue
			}
			if reflect.DeepEqual(docs, r.Docs) {
				continue
			}
			if diff := cmp.Diff(docs, r.Docs); diff != "" {
				t.Errorf("%s: %s reads other objects than the target wrote (-wrote +read):\n%s", name, loader, diff)
			}
		}
	}
	for name, strs := range literals {
		r := loaded[name]["python"]
		if r.Err != nil {
			t.Errorf("%s: Python cannot parse the DAG: %v", name, r.Err)
			continue
		}
		for _, s := range strs {
			if !slices.Contains(r.Strings, s) {
				t.Errorf("%s: no literal of the DAG reads back as %q", name, s)
			}
		}
	}
}
