package airflow

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/harness/benchflow"
	"github.com/manifoldflow/manifold/plan"
)

// quoteCases cover every branch of quote; real_test.go has Python itself read the
// adversarial values back.
var quoteCases = []string{
	"", "plain", `"`, `\`, `'`, `"""`, "\n", "\r\n", "\t", "\x00", "\x1f", "\x7f", "\u0080", "\u00a0",
	"é", "✓", "🚀", "\u2028", "\u0085", "\ufeff", "\U000e0001", "\ufffd", `{{ x }}`,
}

// TestQuoteIsOneLineAndReadsBack: Python's and Go's string literals share the
// escapes quote writes (\\, \", \n, \r, \t, \xNN below 0x80, \uNNNN, \UNNNNNNNN),
// so Go's own parser reads the literal back; and the literal never spans lines.
func TestQuoteIsOneLineAndReadsBack(t *testing.T) {
	for _, s := range quoteCases {
		checkQuote(t, s)
	}
}

func FuzzQuote(f *testing.F) {
	for _, s := range quoteCases {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			// A plan holds only UTF-8 (compile refuses the rest); the printer
			// refuses it too rather than quote something else.
			p := &printer{uses: map[string]bool{}}
			if p.str(s, false); p.err == nil {
				t.Errorf("the printer wrote %q, which is not UTF-8", s)
			}
			return
		}
		checkQuote(t, s)
	})
}

func checkQuote(t *testing.T, s string) {
	t.Helper()
	q := quote(s)
	if strings.ContainsAny(q, "\n\r\u2028\u0085") {
		t.Errorf("quote(%q) = %s spans lines", s, q)
	}
	back, err := strconv.Unquote(q)
	if err != nil || back != s {
		t.Errorf("quote(%q) = %s reads back as %q (%v)", s, q, back, err)
	}
}

func TestSnake(t *testing.T) {
	for in, want := range map[string]string{
		"name": "name", "claimName": "claim_name", "mountPath": "mount_path", "runAsNonRoot": "run_as_non_root",
		"hostIPC": "host_ipc", "podIP": "pod_ip", "seLinuxOptions": "se_linux_options", "httpGet": "http_get",
		"fsGroupChangePolicy": "fs_group_change_policy", "terminationGracePeriodSeconds": "termination_grace_period_seconds",
	} {
		if got := snake(in); got != want {
			t.Errorf("snake(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestPodFieldWithoutArgumentIsAnError: a pod field the operator has no argument
// for stops the emit instead of vanishing from the Airflow pod.
func TestPodFieldWithoutArgumentIsAnError(t *testing.T) {
	f := &plan.Flow{Name: "f", Steps: []plan.Step{{Name: "a", Image: "busybox", Command: []string{"true"}}}}
	s := &f.Steps[0]
	base := emit.Pod(f, s, emit.PodOptions{Param: ParamRef})
	if _, err := operatorArgs(f, s, base, true); err != nil {
		t.Fatalf("the shared pod itself: %v", err)
	}
	for name, change := range map[string]func(*corev1.PodTemplateSpec){
		"hostPID":                  func(p *corev1.PodTemplateSpec) { p.Spec.HostPID = true },
		"restartPolicy":            func(p *corev1.PodTemplateSpec) { p.Spec.RestartPolicy = corev1.RestartPolicyOnFailure },
		"terminationMessagePath":   func(p *corev1.PodTemplateSpec) { p.Spec.Containers[0].TerminationMessagePath = "/x" },
		"initContainers":           func(p *corev1.PodTemplateSpec) { p.Spec.InitContainers = []corev1.Container{{Name: "init"}} },
		"finalizers":               func(p *corev1.PodTemplateSpec) { p.Finalizers = []string{"x"} },
		"shareProcessNamespace":    func(p *corev1.PodTemplateSpec) { p.Spec.ShareProcessNamespace = new(true) },
		"a second container (has)": func(p *corev1.PodTemplateSpec) { p.Spec.Containers = append(p.Spec.Containers, corev1.Container{}) },
	} {
		pod := *base.DeepCopy()
		change(&pod)
		_, err := operatorArgs(f, s, pod, true)
		want := name
		if i := strings.Index(name, " ("); i >= 0 {
			want = name[i+2 : len(name)-1]
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one naming %q", name, err, want)
		}
	}
}

// TestQuoteReadsBackInPython: Python itself reads every quoted seed of FuzzQuote
// back as the same string (compared through JSON, which both sides write
// exactly).
func TestQuoteReadsBackInPython(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3, which checks the quoted literals, is not on PATH: %v", err)
	}
	cases := append(append([]string(nil), quoteCases...), "yes", "0755", "1e3", "~", "*x", "&a", "!t", "- ", ": ", "#", "{% raw %}", "$(A)")
	var prog strings.Builder
	prog.WriteString("import json, sys\ncases = [\n")
	for _, s := range cases {
		prog.WriteString("    " + quote(s) + ",\n")
	}
	prog.WriteString("]\nsys.stdout.write(json.dumps(cases))\n")
	cmd := exec.Command(python, "-c", prog.String())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3: %v\n%s", err, prog.String())
	}
	var back []string
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatalf("reading Python's output: %v\n%s", err, out)
	}
	if len(back) != len(cases) {
		t.Fatalf("Python read %d strings, want %d", len(back), len(cases))
	}
	for i, s := range cases {
		if back[i] != s {
			t.Errorf("quote(%q) = %s reads in Python as %q", s, quote(s), back[i])
		}
	}
}

// TestWriteJSONIsMarshalIndent: the .kpo.json that WriteJSON writes a task at a
// time is byte for byte encoding/json's indented form of the whole file, for a
// one-task DAG and for flows of every kind of step.
func TestWriteJSONIsMarshalIndent(t *testing.T) {
	one := &plan.Flow{Name: "f", Steps: []plan.Step{{Name: "a", Image: "busybox", Command: []string{"true"}}}}
	flows := []*plan.Flow{one}
	for _, shape := range benchflow.Shapes {
		p, errs := compile.Compile(benchflow.Flow(shape, 40, benchflow.Options{}), compile.Options{})
		if len(errs) > 0 {
			t.Fatal(errs.ToAggregate())
		}
		flows = append(flows, p)
	}
	for _, f := range flows {
		d, errs := Build(f)
		if len(errs) > 0 {
			t.Fatal(errs.ToAggregate())
		}
		wantMarshalIndent(t, f.Name, d)
	}
}

// TestPythonInPieces: the DAG file is the same whether the printer keeps its
// text whole or puts it aside every few lines.
func TestPythonInPieces(t *testing.T) {
	p, errs := compile.Compile(benchflow.Flow(benchflow.FanOut, 40, benchflow.Options{}), compile.Options{})
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	d, errs := Build(p)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	write := func(chunk int) string {
		defer func(old int) { printChunk = old }(printChunk)
		printChunk = chunk
		var b bytes.Buffer
		if err := d.WritePython(&b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	whole := write(1 << 30)
	if pieces := write(100); pieces != whole {
		t.Errorf("in pieces of 100 bytes the file differs:\n%s", cmp.Diff(whole, pieces))
	}
	// Emit, which puts the text aside in a temporary file, a step at a time,
	// writes the same file, and the .kpo.json file WriteJSON writes, at
	// either size of piece.
	var kpo bytes.Buffer
	if err := d.WriteJSON(&kpo); err != nil {
		t.Fatal(err)
	}
	for _, chunk := range []int{100, 1 << 30} {
		func() {
			defer func(old int) { printChunk = old }(printChunk)
			printChunk = chunk
			files, errs := emit.Files(Target{}, p)
			if len(errs) > 0 {
				t.Fatal(errs.ToAggregate())
			}
			if len(files) != 2 || files[0].Name != p.Name+".py" || files[1].Name != p.Name+".kpo.json" {
				t.Fatalf("files %v", files)
			}
			if got := string(files[0].Data); got != whole {
				t.Errorf("pieces of %d bytes: Emit's DAG file differs from WritePython's:\n%s", chunk, cmp.Diff(whole, got))
			}
			if !bytes.Equal(files[1].Data, kpo.Bytes()) {
				t.Errorf("pieces of %d bytes: Emit's .kpo.json differs from WriteJSON's:\n%s", chunk, cmp.Diff(kpo.String(), string(files[1].Data)))
			}
		}()
	}
}

// wantMarshalIndent checks that d's WriteJSON writes what encoding/json's
// MarshalIndent writes of the same file.
func wantMarshalIndent(t *testing.T, name string, d *DAG) {
	t.Helper()
	file := KPOFile{DAGID: d.ID, Params: map[string]string{}, Tasks: []KPOTask{}}
	if d.Schedule != "" {
		file.Schedule = &d.Schedule
	}
	for _, p := range d.Params {
		file.Params[p.Name] = p.Value
	}
	for i := range d.Tasks {
		file.Tasks = append(file.Tasks, kpoTask(&d.Tasks[i]))
	}
	want, err := json.MarshalIndent(file, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if err := d.WriteJSON(&got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), append(want, '\n')) {
		t.Errorf("%s: WriteJSON differs from MarshalIndent:\n%s", name, cmp.Diff(string(want)+"\n", got.String()))
	}
}
