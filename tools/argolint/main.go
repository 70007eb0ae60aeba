// Command argolint checks Argo Workflows manifests with Argo's own validator,
// without a cluster: each YAML document is decoded strictly (unknown or duplicate
// fields are errors) into the argo-workflows v3.7.18 API types, then a
// WorkflowTemplate goes through validate.ValidateWorkflowTemplate with lint options
// (what `argo lint` runs), a CronWorkflow through validate.ValidateCronWorkflow,
// and a Workflow through validate.ValidateWorkflow as Argo's server validates one
// submitted (every parameter given a value), their workflowTemplateRef resolved
// against the WorkflowTemplates of the same files.
//
//	argolint FILE...
//	argolint -manifests UID FILE...
//	argolint -conditions SUCCESS FAILURE FILE
//
// It prints one line per problem, prefixed with the file, document and object, and
// exits 1 if there is any (2 for a file it cannot read). It lives in a module of its
// own so that the SDK's go.mod never takes Argo's requirements.
//
// With -manifests it prints instead, as a YAML stream, the manifest that each
// resource template of each WorkflowTemplate's DAG creates, after the substitution
// Argo's controller makes (common.SubstituteParams, and its expansion of withItems
// into the task's arguments), with every parameter at its default and UID as the
// workflow's uid. Each document follows a comment line naming the template, task
// and item.
//
// With -conditions it prints, for each object in FILE, what Argo's executor makes
// of a resource template's successCondition and failureCondition on it: failed,
// succeeded or waiting.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/argoproj/argo-workflows/v3/workflow/templateresolution"
	"github.com/argoproj/argo-workflows/v3/workflow/validate"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

func main() {
	files, uid, manifests := os.Args[1:], "", false
	if len(files) == 4 && files[0] == "-conditions" {
		if err := printConditions(os.Stdout, files[1], files[2], files[3]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if len(files) > 1 && files[0] == "-manifests" {
		uid, files, manifests = files[1], files[2:], true
	}
	if len(files) < 1 {
		fmt.Fprintln(os.Stderr, "usage: argolint FILE...\n       argolint -manifests UID FILE...\n       argolint -conditions SUCCESS FAILURE FILE")
		os.Exit(2)
	}
	var docs []document
	for _, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		docs = append(docs, split(path, data)...)
	}
	if manifests {
		if err := printManifests(os.Stdout, docs, uid); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	problems := lint(docs)
	for _, p := range problems {
		fmt.Println(p)
	}
	if len(problems) > 0 {
		os.Exit(1)
	}
	fmt.Printf("argolint: %d objects ok\n", len(docs))
}

// document is one YAML document of a file, or the error met splitting it.
type document struct {
	path  string
	index int
	data  []byte
	err   error
}

func (d document) String() string { return fmt.Sprintf("%s: document %d", d.path, d.index) }

// split returns the non-empty documents of a YAML stream.
func split(path string, data []byte) []document {
	var out []document
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for i := 0; ; {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			return append(out, document{path: path, index: i, err: err})
		}
		var content any
		if yaml.Unmarshal(doc, &content) == nil && content == nil {
			continue // only comments, or nothing
		}
		out = append(out, document{path: path, index: i, data: doc})
		i++
	}
}

// lint decodes every document, then validates each object; a CronWorkflow's
// workflowTemplateRef is looked up among the decoded WorkflowTemplates. Problems
// come in document order.
func lint(docs []document) []string {
	byDoc := make([][]string, len(docs))
	report := func(i int, format string, args ...any) {
		byDoc[i] = append(byDoc[i], fmt.Sprintf("%s: ", docs[i])+fmt.Sprintf(format, args...))
	}
	templates := getter{}
	wts := map[int]*wfv1.WorkflowTemplate{}
	crons := map[int]*wfv1.CronWorkflow{}
	workflows := map[int]*wfv1.Workflow{}
	for i, d := range docs {
		if d.err != nil {
			report(i, "%v", d.err)
			continue
		}
		var meta struct{ APIVersion, Kind string }
		if err := yaml.Unmarshal(d.data, &meta); err != nil {
			report(i, "%v", err)
			continue
		}
		if meta.APIVersion != "argoproj.io/v1alpha1" {
			report(i, "apiVersion %q, want argoproj.io/v1alpha1", meta.APIVersion)
			continue
		}
		switch meta.Kind {
		case "WorkflowTemplate":
			var t wfv1.WorkflowTemplate
			if err := decode(d.data, &t); err != nil {
				report(i, "WorkflowTemplate: decode: %v", err)
				continue
			}
			templates[t.Name] = &t
			wts[i] = &t
		case "CronWorkflow":
			var c wfv1.CronWorkflow
			if err := decode(d.data, &c); err != nil {
				report(i, "CronWorkflow: decode: %v", err)
				continue
			}
			crons[i] = &c
		case "Workflow":
			var w wfv1.Workflow
			if err := decode(d.data, &w); err != nil {
				report(i, "Workflow: decode: %v", err)
				continue
			}
			workflows[i] = &w
		default:
			report(i, "kind %q: argolint checks WorkflowTemplate, CronWorkflow and Workflow", meta.Kind)
		}
	}
	clusterTemplates := &templateresolution.NullClusterWorkflowTemplateGetter{}
	for i := range docs {
		if t := wts[i]; t != nil {
			if err := validate.ValidateWorkflowTemplate(templates, clusterTemplates, t, nil, validate.ValidateOpts{Lint: true}); err != nil {
				report(i, "WorkflowTemplate %s: %v", t.Name, err)
			}
		}
		if c := crons[i]; c != nil {
			if err := validate.ValidateCronWorkflow(context.Background(), templates, clusterTemplates, c, nil); err != nil {
				report(i, "CronWorkflow %s: %v", c.Name, err)
			}
		}
		if w := workflows[i]; w != nil {
			if err := validate.ValidateWorkflow(templates, clusterTemplates, w, nil, validate.ValidateOpts{Submit: true}); err != nil {
				report(i, "Workflow %s%s: %v", w.Name, w.GenerateName, err)
			}
		}
	}
	var problems []string
	for _, p := range byDoc {
		problems = append(problems, p...)
	}
	return problems
}

// decode converts a YAML document to JSON as kubectl does, without looking at the
// target type (so a bare `false` stays a boolean, which the CRD's schema refuses
// where it wants a string), refusing duplicate keys, then decodes it refusing
// unknown fields.
func decode(doc []byte, into any) error {
	data, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one object in the document")
	}
	return nil
}

// getter resolves workflowTemplateRef against the WorkflowTemplates being linted.
type getter map[string]*wfv1.WorkflowTemplate

func (g getter) Get(name string) (*wfv1.WorkflowTemplate, error) {
	if t, ok := g[name]; ok {
		return t, nil
	}
	return nil, fmt.Errorf("workflowTemplateRef %q: no WorkflowTemplate of that name in the linted files", name)
}
