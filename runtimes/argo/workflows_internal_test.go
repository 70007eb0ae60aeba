package argo

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestCompressedNodes: the nodes of a Workflow that Argo's controller keeps
// compressed are read as if they were not; offloaded nodes are refused.
func TestCompressedNodes(t *testing.T) {
	nodes := wfv1.Nodes{"wf-1": {ID: "wf-1", Name: "wf.each(0:0)", TemplateName: "each", Type: wfv1.NodeTypePod, Phase: wfv1.NodeSucceeded}}
	data, err := json.Marshal(nodes)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(data)
	zw.Close()
	wf := &wfv1.Workflow{Status: wfv1.WorkflowStatus{CompressedNodes: base64.StdEncoding.EncodeToString(buf.Bytes())}}
	wf.Name = "wf"
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(wf)
	if err != nil {
		t.Fatal(err)
	}
	got, err := toWorkflow(&unstructured.Unstructured{Object: obj})
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := got.Status.Nodes["wf-1"]; !ok || n.TemplateName != "each" || n.Phase != wfv1.NodeSucceeded {
		t.Errorf("nodes %v", got.Status.Nodes)
	}
	wf.Status.CompressedNodes, wf.Status.OffloadNodeStatusVersion = "", "v1"
	obj, _ = runtime.DefaultUnstructuredConverter.ToUnstructured(wf)
	if _, err := toWorkflow(&unstructured.Unstructured{Object: obj}); err == nil {
		t.Error("a Workflow of offloaded nodes was read")
	}
	wf.Status.OffloadNodeStatusVersion, wf.Status.CompressedNodes = "", "not base64!"
	obj, _ = runtime.DefaultUnstructuredConverter.ToUnstructured(wf)
	if _, err := toWorkflow(&unstructured.Unstructured{Object: obj}); err == nil {
		t.Error("a Workflow of corrupt compressed nodes was read")
	}
}
