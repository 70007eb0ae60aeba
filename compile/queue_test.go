package compile_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/sdk"
)

func TestQueue(t *testing.T) {
	s := mustStep(t, one(sdk.Queue("team-a"), sdk.Priority("high"), sdk.Topology("example.com/block")), compile.Options{}, "s")
	if s.Queue != "team-a" || s.Priority != "high" || s.Topology != "example.com/block" {
		t.Errorf("queue %q, priority %q, topology %q", s.Queue, s.Priority, s.Topology)
	}
	// manifold.toml's queue is the lowest default: the flow's wins over it, the
	// step's over both.
	cfg := compile.Options{Config: compile.Config{Queue: "from-config"}}
	p := mustCompile(t, sdk.NewFlow("f", sdk.Image(img), sdk.Queue("from-flow")).
		Step("flow", sdk.Command("true")).
		Step("step", sdk.Command("true"), sdk.Queue("own")), cfg)
	if a, b := p.Step("flow").Queue, p.Step("step").Queue; a != "from-flow" || b != "own" {
		t.Errorf("queues %q, %q; want from-flow, own", a, b)
	}
	if q := mustStep(t, one(), cfg, "s").Queue; q != "from-config" {
		t.Errorf("config queue %q", q)
	}
	// A priority without a queue is the pods' PriorityClass alone.
	if s := mustStep(t, one(sdk.Priority("high")), compile.Options{}, "s"); s.Priority != "high" || s.Queue != "" {
		t.Errorf("priority alone: %+v", s)
	}
}

func TestQueueErrors(t *testing.T) {
	runErrorCases(t, []errorCase{
		{name: "an empty queue", flow: one(sdk.Queue("")),
			want: field.ErrorList{field.Required(sAt("queue"), "")}, details: []string{"LocalQueue"}},
		{name: "a queue that is no name", flow: one(sdk.Queue("Team_A")),
			want: field.ErrorList{field.Invalid(sAt("queue"), nil, "")}},
		{name: "a queue too long for a label", flow: one(sdk.Queue("q0123456789012345678901234567890123456789012345678901234567890123")),
			want: field.ErrorList{field.Invalid(sAt("queue"), nil, "")}},
		{name: "an empty priority", flow: one(sdk.Priority("")),
			want: field.ErrorList{field.Required(sAt("priority"), "")}},
		{name: "Topology without a queue", flow: one(sdk.Topology("example.com/block")),
			want: field.ErrorList{field.Forbidden(sAt("topology"), "")}, details: []string{"add sdk.Queue(name)"}},
		{name: "Topology from the flow without a queue", flow: sdk.NewFlow("f", sdk.Topology("example.com/block")).Step("s", sdk.Image(img), sdk.Command("true")),
			want: field.ErrorList{field.Forbidden(field.NewPath("flow", "topology"), "")}},
		{name: "an empty topology", flow: one(sdk.Queue("q"), sdk.Topology("")),
			want: field.ErrorList{field.Required(sAt("topology"), "")}},
		{name: "a topology that is no label", flow: one(sdk.Queue("q"), sdk.Topology("not a label")),
			want: field.ErrorList{field.Invalid(sAt("topology"), nil, "")}},
		{name: "Kueue's queue label by hand", flow: one(sdk.Label("kueue.x-k8s.io/queue-name", "q")),
			want: field.ErrorList{field.Forbidden(sAt("labels").Key("kueue.x-k8s.io/queue-name"), "")}, details: []string{"sdk.Queue"}},
		{name: "Kueue's topology annotation by hand", flow: one(sdk.Annotation("kueue.x-k8s.io/podset-required-topology", "x")),
			want: field.ErrorList{field.Forbidden(sAt("annotations").Key("kueue.x-k8s.io/podset-required-topology"), "")}},
	})
}
