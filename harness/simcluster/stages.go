package simcluster

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// LabelFail, set to "true" on a pod, makes kwok fail the pod (exit code 1) once it
// runs, instead of completing it: tests use it to prove that a failed step stops
// the steps after it. A flow may set it with sdk.Label (it is outside Manifold's
// own manifold.dev/ keys).
const LabelFail = "sim.manifold.dev/fail"

// LabelFailIndexOne, set to "true" on a pod, makes kwok fail the pod if it is
// that of completion index 1 of an Indexed Job, as LabelFail fails every pod:
// tests use it to prove that one item of a fan-out fails (and is retried) on
// its own, while the items beside it succeed.
const LabelFailIndexOne = "sim.manifold.dev/fail-index-1"

// LabelRunFor, set to a duration ("20s") on a pod, keeps the pod Running that
// long before kwok completes it, instead of completing it at once: tests use it
// where pods must run side by side, as the nodes of a multi-node step do.
const LabelRunFor = "sim.manifold.dev/run-for"

// stageDirs are the stock kwok stage sets the cluster loads, under assets/.
var stageDirs = []string{"kwok-stages/node-fast", "kwok-stages/node-heartbeat", "kwok-stages/pod-fast"}

// failStage moves a running pod labelled LabelFail=true to Failed. Its weight
// makes kwok pick it over the completion stages that match the same pod (stages
// of weight 0 are left out when any matching stage has a weight).
var failStage = `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: manifold-pod-fail
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  weight: 1
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values: ['Running']
    - key: '.metadata.labels["` + LabelFail + `"]'
      operator: 'In'
      values: ['true']
  next:
    statusTemplate: |
      {{ $now := Now }}
      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: false
        restartCount: 0
        started: false
        state:
          terminated:
            exitCode: 1
            finishedAt: {{ $now | Quote }}
            reason: Error
            message: failed by the sim.manifold.dev/fail label
            startedAt: {{ $now | Quote }}
      {{ end }}
      phase: Failed
      reason: Error
`

// failIndexStage is failStage for the pods of completion index 1 labelled
// LabelFailIndexOne=true.
var failIndexStage = strings.NewReplacer(
	"name: manifold-pod-fail\n", "name: manifold-pod-fail-index-1\n",
	`.metadata.labels["`+LabelFail+`"]'`, `.metadata.labels["`+LabelFailIndexOne+`"]'`+"\n      operator: 'In'\n      values: ['true']\n    - key: '.metadata.annotations[\"batch.kubernetes.io/job-completion-index\"]'",
	"values: ['true']\n  next:", "values: ['1']\n  next:",
	"by the "+LabelFail+" label", "by the "+LabelFailIndexOne+" label",
).Replace(failStage)

// LabelPodOperator is the label, set to "True", that Airflow's
// KubernetesPodOperator puts on every pod it creates. kwok completes the pods
// that carry it and have no owner: the bare pods of the operator's tasks.
const LabelPodOperator = "kubernetes_pod_operator"

// writeStages writes the kwok configuration: the stock node and pod stages, a
// copy of the stock pod-complete stage that completes pods owned by Argo
// Workflows (the stock one completes only pods owned by Jobs), another that
// completes Airflow's bare operator pods, one that completes pods labelled
// LabelRunFor after their time, and failStage.
func writeStages(assetDir, path string) error {
	var out bytes.Buffer
	var podComplete []byte
	for _, d := range stageDirs {
		files, err := filepath.Glob(filepath.Join(assetDir, d, "*.yaml"))
		if err != nil {
			return err
		}
		sort.Strings(files)
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			out.WriteString("---\n")
			out.Write(data)
			if filepath.Base(f) == "pod-complete.yaml" {
				podComplete = data
			}
		}
	}
	if podComplete == nil {
		return fmt.Errorf("no pod-complete stage under %s", assetDir)
	}
	workflow, err := forPods(podComplete, "manifold-pod-complete-workflow",
		map[string]any{"key": ownerKinds, "operator": "In", "values": []any{"Workflow"}})
	if err != nil {
		return err
	}
	// A pod owned by anything (the Pods of an operator's Job carry the label
	// too) is left to the stage of its owner: one pod, one stage.
	bare, err := forPods(podComplete, "manifold-pod-complete-airflow",
		map[string]any{"key": ".metadata.ownerReferences", "operator": "DoesNotExist"},
		map[string]any{"key": `.metadata.labels["` + LabelPodOperator + `"]`, "operator": "In", "values": []any{"True"}})
	if err != nil {
		return err
	}
	runFor, err := forPods(podComplete, "manifold-pod-run-for",
		map[string]any{"key": `.metadata.labels["` + LabelRunFor + `"]`, "operator": "Exists"})
	if err != nil {
		return err
	}
	// Chosen over the stages that complete the same pod at once (weight), after
	// the label's duration.
	if runFor, err = withSpec(runFor, map[string]any{
		"weight": 1,
		"delay":  map[string]any{"durationFrom": map[string]any{"expressionFrom": `.metadata.labels["` + LabelRunFor + `"]`}},
	}); err != nil {
		return err
	}
	for _, stage := range [][]byte{workflow, bare, runFor} {
		out.WriteString("---\n")
		out.Write(stage)
	}
	out.WriteString("---\n")
	out.WriteString(failStage)
	out.WriteString("---\n")
	out.WriteString(failIndexStage)
	return os.WriteFile(path, out.Bytes(), 0o644)
}

// withSpec returns the stage stage with fields set in its spec.
func withSpec(stage []byte, fields map[string]any) ([]byte, error) {
	var s map[string]any
	if err := yaml.Unmarshal(stage, &s); err != nil {
		return nil, err
	}
	spec, _ := s["spec"].(map[string]any)
	if spec == nil {
		return nil, fmt.Errorf("stage has no spec")
	}
	for k, v := range fields {
		spec[k] = v
	}
	return yaml.Marshal(s)
}

// ownerKinds is the key by which the stock pod-complete stage selects the kind
// of a pod's owners.
const ownerKinds = ".metadata.ownerReferences.[].kind"

// forPods returns the stage stage renamed to name, its selection by owner kind
// replaced with the match expressions exprs.
func forPods(stage []byte, name string, exprs ...map[string]any) ([]byte, error) {
	var s map[string]any
	if err := yaml.Unmarshal(stage, &s); err != nil {
		return nil, err
	}
	s["metadata"] = map[string]any{"name": name}
	spec, _ := s["spec"].(map[string]any)
	sel, _ := spec["selector"].(map[string]any)
	old, _ := sel["matchExpressions"].([]any)
	var kept []any
	found := false
	for _, e := range old {
		if m, _ := e.(map[string]any); m["key"] == ownerKinds {
			found = true
			continue
		}
		kept = append(kept, e)
	}
	if !found {
		return nil, fmt.Errorf("the stock pod-complete stage no longer selects by owner kind; update forPods")
	}
	for _, e := range exprs {
		kept = append(kept, e)
	}
	sel["matchExpressions"] = kept
	return yaml.Marshal(s)
}
