package compile_test

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

func nop(*sdk.Context) error { return nil }

func TestMaxNameLength(t *testing.T) {
	if compile.MaxNameLength != 40 {
		t.Errorf("MaxNameLength = %d, want 40", compile.MaxNameLength)
	}
}

func TestNames(t *testing.T) {
	forty := strings.Repeat("a", 39) + "z"
	for _, tc := range []struct {
		name       string
		flow, step string
	}{
		{"short", "f", "s"},
		{"digits and dashes", "neuron-train-2", "step-1"},
		{"step starts with a digit", "f1", "2step"},
		{"forty characters", forty, forty},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustCompile(t, sdk.NewFlow(tc.flow, sdk.Image(img)).Step(tc.step, sdk.Command("true")), compile.Options{})
			if p.Name != tc.flow {
				t.Errorf("flow name = %q, want %q", p.Name, tc.flow)
			}
			if len(p.Steps) != 1 || p.Steps[0].Name != tc.step {
				t.Errorf("steps = %+v, want one called %q", p.Steps, tc.step)
			}
		})
	}
}

func TestNameErrors(t *testing.T) {
	long, longer := strings.Repeat("a", 41), strings.Repeat("a", 64)
	flowNamed := func(name string) *sdk.Flow {
		return sdk.NewFlow(name, sdk.Image(img)).Step("s", sdk.Command("true"))
	}
	stepNamed := func(name string) *sdk.Flow {
		return sdk.NewFlow("f", sdk.Image(img)).Step(name, sdk.Command("true"))
	}
	name := field.NewPath("name")
	runErrorCases(t, []errorCase{
		{
			name:    "after a misspelt step",
			flow:    sdk.NewFlow("f", sdk.Image(img)).Step("prepare", sdk.Command("true")).Step("train", sdk.Command("true"), sdk.After("prepar")),
			want:    field.ErrorList{field.NotFound(stepAt("train").Child("after").Index(0), nil)},
			details: []string{"sdk.After names steps of the same flow; did you mean prepare?"},
		},
		{
			name:    "set of a misspelt step",
			flow:    stepNamed("train"),
			opts:    compile.Options{Overrides: map[string][]sdk.StepOption{"trian": {sdk.Retry(1)}}},
			want:    field.ErrorList{field.NotFound(field.NewPath("set").Key("trian"), nil)},
			details: []string{"the flow's steps are train; did you mean train?"},
		},
		{name: "flow uppercase", flow: flowNamed("Train"), want: field.ErrorList{field.Invalid(name, nil, "")}},
		{name: "flow underscore", flow: flowNamed("my_flow"), want: field.ErrorList{field.Invalid(name, nil, "")}},
		{name: "flow starts with a digit", flow: flowNamed("1flow"), want: field.ErrorList{field.Invalid(name, nil, "")}, details: []string{"start with a letter"}},
		{name: "flow 41 characters", flow: flowNamed(long), want: field.ErrorList{field.Invalid(name, nil, "")}},
		{name: "flow empty", flow: flowNamed(""), want: field.ErrorList{field.Required(name, "")}},
		{name: "flow ends with a dash", flow: flowNamed("f-"), want: field.ErrorList{field.Invalid(name, nil, "")}},
		{name: "step uppercase", flow: stepNamed("Train"), want: field.ErrorList{field.Invalid(stepAt("Train").Child("name"), nil, "")}},
		{name: "step underscore", flow: stepNamed("train_1"), want: field.ErrorList{field.Invalid(stepAt("train_1").Child("name"), nil, "")}},
		{name: "step 41 characters", flow: stepNamed(long), want: field.ErrorList{field.Invalid(stepAt(long).Child("name"), nil, "")}},
		{name: "step dot", flow: stepNamed("a.b"), want: field.ErrorList{field.Invalid(stepAt("a.b").Child("name"), nil, "")}},
		// One name, one error, which says every rule it breaks.
		{
			name: "step 64 characters", flow: stepNamed(longer),
			want:    field.ErrorList{field.Invalid(stepAt(longer).Child("name"), nil, "")},
			details: []string{"at most 40 characters (it has 64)"},
		},
		{
			name: "flow 64 characters", flow: flowNamed(longer),
			want:    field.ErrorList{field.Invalid(name, nil, "")},
			details: []string{"at most 40 characters (it has 64)"},
		},
		{
			name: "step uppercase and 41 characters", flow: stepNamed("A" + long[1:]),
			want:    field.ErrorList{field.Invalid(stepAt("A"+long[1:]).Child("name"), nil, "")},
			details: []string{"lower case alphanumeric characters"},
		},
		{
			name: "flow starting with a digit and 41 characters", flow: flowNamed("1" + long[1:]),
			want:    field.ErrorList{field.Invalid(name, nil, "")},
			details: []string{"start with a letter, as the names of the Services and JobSets made from it must; and it may have at most 40 characters (it has 41)"},
		},
		{
			name: "step empty is found by index",
			flow: sdk.NewFlow("f", sdk.Image(img)).Step("a", sdk.Command("true")).Step("", sdk.Command("true")),
			want: field.ErrorList{field.Required(field.NewPath("steps").Index(1).Child("name"), "")},
		},
		{
			name:    "duplicate step",
			flow:    sdk.NewFlow("f", sdk.Image(img)).Step("a", sdk.Command("true")).Step("b", sdk.Command("true")).Step("a", sdk.Command("false")),
			want:    field.ErrorList{field.Duplicate(stepAt("a").Child("name"), nil)},
			details: []string{`steps[0] and steps[2] are both named "a": rename one of them`},
		},
	})
}

func TestBody(t *testing.T) {
	for _, tc := range []struct {
		name string
		flow *sdk.Flow
		cfg  compile.Config
		want plan.Step
	}{
		{
			name: "command",
			flow: sdk.NewFlow("f", sdk.Image(img)).Step("s", sdk.Command("torchrun", "train.py", "--epochs", "$(MANIFOLD_PARAM_EPOCHS)")),
			want: with(func(s *plan.Step) {
				s.Command = []string{"torchrun", "train.py", "--epochs", "$(MANIFOLD_PARAM_EPOCHS)"}
			}),
		},
		{
			name: "run with the default entrypoint",
			flow: sdk.NewFlow("f", sdk.Image(img)).Step("s", sdk.Run(nop)),
			want: with(func(s *plan.Step) {
				s.Body = plan.BodyRun
				s.Command = []string{"/usr/local/bin/f", "step", "s"}
				s.RunAsNonRoot = new(true) // the flow's own image, on the default base
			}),
		},
		{
			name: "run with the config's entrypoint",
			flow: sdk.NewFlow("f", sdk.Image(img)).Step("s", sdk.Run(nop)),
			cfg:  compile.Config{Entrypoint: "/app/flow"},
			want: with(func(s *plan.Step) {
				s.Body = plan.BodyRun
				s.Command = []string{"/app/flow", "step", "s"}
				s.RunAsNonRoot = new(true)
			}),
		},
		{
			name: "config entrypoint does not touch command steps",
			flow: sdk.NewFlow("f", sdk.Image(img)).Step("s", sdk.Command("true")),
			cfg:  compile.Config{Entrypoint: "/app/flow"},
			want: cmdStep(),
		},
		{
			name: "image from the config",
			flow: sdk.NewFlow("f").Step("s", sdk.Command("true")),
			cfg:  compile.Config{Image: img},
			want: cmdStep(),
		},
		{
			name: "foreach",
			flow: sdk.NewFlow("f", sdk.Image(img)).Step("s", sdk.Command("true"), sdk.Foreach("a", "b", "c")),
			want: with(func(s *plan.Step) { s.Foreach = []string{"a", "b", "c"} }),
		},
		{
			name: "last foreach wins",
			flow: sdk.NewFlow("f", sdk.Image(img)).Step("s", sdk.Command("true"), sdk.Foreach("a", "b"), sdk.Foreach("c")),
			want: with(func(s *plan.Step) { s.Foreach = []string{"c"} }),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := mustStep(t, tc.flow, compile.Options{Config: tc.cfg}, "s")
			if diff := cmp.Diff(tc.want, got, planOpts); diff != "" {
				t.Errorf("step (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRunStepsOfALongFlow(t *testing.T) {
	f := sdk.NewFlow("neuron-train", sdk.Image(img)).
		Step("prepare", sdk.Run(nop)).
		Step("train", sdk.Run(nop), sdk.After("prepare"))
	p := mustCompile(t, f, compile.Options{})
	for _, name := range []string{"prepare", "train"} {
		want := []string{"/usr/local/bin/neuron-train", "step", name}
		if diff := cmp.Diff(want, p.Step(name).Command); diff != "" {
			t.Errorf("%s: command (-want +got):\n%s", name, diff)
		}
	}
}

func TestDefaultEntrypoint(t *testing.T) {
	for flow, want := range map[string]string{
		"f":            "/usr/local/bin/f",
		"neuron-train": "/usr/local/bin/neuron-train",
	} {
		if got := compile.DefaultEntrypoint(flow); got != want {
			t.Errorf("DefaultEntrypoint(%q) = %q, want %q", flow, got, want)
		}
	}
}

func TestBodyErrors(t *testing.T) {
	runErrorCases(t, []errorCase{
		{
			name: "command without image",
			flow: sdk.NewFlow("f").Step("s", sdk.Command("true")),
			want: field.ErrorList{field.Required(sAt("image"), "")},
		},
		{
			name: "run without image",
			flow: sdk.NewFlow("f").Step("s", sdk.Run(nop)),
			want: field.ErrorList{field.Required(sAt("image"), "")},
		},
		{
			name: "empty image",
			flow: sdk.NewFlow("f").Step("s", sdk.Command("true"), sdk.Image("")),
			want: field.ErrorList{field.Required(sAt("image"), "")},
		},
		{
			name: "image with a space",
			flow: sdk.NewFlow("f").Step("s", sdk.Command("true"), sdk.Image("ubuntu latest")),
			want: field.ErrorList{field.Invalid(sAt("image"), nil, "")},
		},
		{
			name: "run and command",
			flow: sdk.NewFlow("f", sdk.Image(img)).Step("s", sdk.Run(nop), sdk.Command("true")),
			want: field.ErrorList{field.Forbidden(sAt("command"), "")},
		},
		{
			name: "neither run nor command",
			flow: sdk.NewFlow("f", sdk.Image(img)).Step("s"),
			want: field.ErrorList{field.Required(sAt("run"), "")},
		},
		{
			name: "empty command",
			flow: sdk.NewFlow("f", sdk.Image(img)).Step("s", sdk.Command()),
			want: field.ErrorList{field.Required(sAt("command"), "")},
		},
		{
			name: "foreach without items",
			flow: one(sdk.Foreach()),
			want: field.ErrorList{field.Required(sAt("foreach"), "")},
		},
		{
			name: "no steps",
			flow: sdk.NewFlow("f", sdk.Image(img)),
			want: field.ErrorList{field.Required(field.NewPath("steps"), "")},
		},
		{
			name: "no flow",
			flow: nil,
			want: field.ErrorList{field.Required(field.NewPath("flow"), "")},
		},
		{
			name: "config entrypoint with a space",
			flow: sdk.NewFlow("f", sdk.Image(img)).Step("s", sdk.Run(nop)),
			opts: compile.Options{Config: compile.Config{Entrypoint: "/usr/local/bin/my flow"}},
			want: field.ErrorList{field.Invalid(field.NewPath("config", "entrypoint"), nil, "")},
		},
	})
}

func TestAfterErrors(t *testing.T) {
	runErrorCases(t, []errorCase{
		{
			name: "unknown step",
			flow: sdk.NewFlow("f", sdk.Image(img)).Step("a", sdk.Command("true")).Step("b", sdk.Command("true"), sdk.After("nope")),
			want: field.ErrorList{field.NotFound(stepAt("b").Child("after").Index(0), "nope")},
		},
		{
			name: "unknown step second",
			flow: sdk.NewFlow("f", sdk.Image(img)).Step("a", sdk.Command("true")).Step("b", sdk.Command("true"), sdk.After("a", "nope")),
			want: field.ErrorList{field.NotFound(stepAt("b").Child("after").Index(1), "nope")},
		},
		{
			name: "itself",
			flow: sdk.NewFlow("f", sdk.Image(img)).Step("a", sdk.Command("true"), sdk.After("a")),
			want: field.ErrorList{field.Invalid(stepAt("a").Child("after").Index(0), nil, "")},
		},
	})
}

func TestCycle(t *testing.T) {
	// alpha waits for charlie, charlie for bravo, bravo for alpha; delta waits for
	// charlie but is not part of the cycle.
	f := sdk.NewFlow("f", sdk.Image(img)).
		Step("delta", sdk.Command("true"), sdk.After("charlie")).
		Step("alpha", sdk.Command("true"), sdk.After("charlie")).
		Step("bravo", sdk.Command("true"), sdk.After("alpha")).
		Step("charlie", sdk.Command("true"), sdk.After("bravo")).
		Step("echo", sdk.Command("true"))
	p, errs := compile.Compile(f, compile.Options{})
	if p != nil {
		t.Errorf("Compile returned a plan for a cycle: %+v", p)
	}
	if len(errs) != 1 {
		t.Fatalf("want one error, got %d:\n%v", len(errs), errs.ToAggregate())
	}
	e := errs[0]
	if e.Type != field.ErrorTypeForbidden {
		t.Errorf("type = %s, want %s", e.Type, field.ErrorTypeForbidden)
	}
	if !regexp.MustCompile(`^steps\[(alpha|bravo|charlie)\]\.after$`).MatchString(e.Field) {
		t.Errorf("field = %q, want steps[<a step of the cycle>].after", e.Field)
	}
	for _, name := range []string{"alpha", "bravo", "charlie"} {
		if !strings.Contains(e.Detail, name) {
			t.Errorf("detail %q does not name %s", e.Detail, name)
		}
	}
	for _, name := range []string{"delta", "echo"} {
		if strings.Contains(e.Detail, name) {
			t.Errorf("detail %q names %s, which is not in the cycle", e.Detail, name)
		}
	}
}

func TestTwoCycles(t *testing.T) {
	f := sdk.NewFlow("f", sdk.Image(img)).
		Step("a", sdk.Command("true"), sdk.After("b")).
		Step("b", sdk.Command("true"), sdk.After("a")).
		Step("c", sdk.Command("true"), sdk.After("d")).
		Step("d", sdk.Command("true"), sdk.After("c"))
	_, errs := compile.Compile(f, compile.Options{})
	if len(errs) != 2 {
		t.Fatalf("want one error per cycle, got %d:\n%v", len(errs), errs.ToAggregate())
	}
	for _, e := range errs {
		if e.Type != field.ErrorTypeForbidden || !strings.HasSuffix(e.Field, "].after") {
			t.Errorf("got %s at %s, want Forbidden at steps[...].after", e.Type, e.Field)
		}
	}
}

func TestOrder(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flow  *sdk.Flow
		order []string
		after map[string][]string
	}{
		{
			name: "declaration order",
			flow: sdk.NewFlow("f", sdk.Image(img)).
				Step("c", sdk.Command("true")).Step("a", sdk.Command("true")).Step("b", sdk.Command("true")),
			order: []string{"c", "a", "b"},
		},
		{
			name: "a step declared before what it waits for comes after it",
			flow: sdk.NewFlow("f", sdk.Image(img)).
				Step("evaluate", sdk.Command("true"), sdk.After("train")).
				Step("train", sdk.Command("true"), sdk.After("prepare")).
				Step("prepare", sdk.Command("true")).
				Step("report", sdk.Command("true")),
			order: []string{"prepare", "train", "evaluate", "report"},
			after: map[string][]string{"evaluate": {"train"}, "train": {"prepare"}},
		},
		{
			name: "diamond",
			flow: sdk.NewFlow("f", sdk.Image(img)).
				Step("join", sdk.Command("true"), sdk.After("left", "right")).
				Step("right", sdk.Command("true"), sdk.After("root")).
				Step("left", sdk.Command("true"), sdk.After("root")).
				Step("root", sdk.Command("true")),
			order: []string{"root", "right", "left", "join"},
			after: map[string][]string{"join": {"left", "right"}, "right": {"root"}, "left": {"root"}},
		},
		{
			name: "after duplicates are dropped and order kept",
			flow: sdk.NewFlow("f", sdk.Image(img)).
				Step("a", sdk.Command("true")).
				Step("b", sdk.Command("true")).
				Step("c", sdk.Command("true"), sdk.After("b", "a", "b"), sdk.After("a")),
			order: []string{"a", "b", "c"},
			after: map[string][]string{"c": {"b", "a"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustCompile(t, tc.flow, compile.Options{})
			var got []string
			for _, s := range p.Steps {
				got = append(got, s.Name)
			}
			if diff := cmp.Diff(tc.order, got); diff != "" {
				t.Errorf("order (-want +got):\n%s", diff)
			}
			for _, s := range p.Steps {
				if diff := cmp.Diff(tc.after[s.Name], s.After, planOpts); diff != "" {
					t.Errorf("%s: after (-want +got):\n%s", s.Name, diff)
				}
			}
		})
	}
}

func TestAllErrorsTogether(t *testing.T) {
	f := sdk.NewFlow("f", sdk.Image(img), sdk.Param("epochs", "3"), sdk.Schedule("every day")).
		Step("a", sdk.Command("true"), sdk.Trainium(0)).
		Step("b", sdk.Command("true"), sdk.After("a"), sdk.InstanceType("trn1.32xlarge"), sdk.EFA(32), sdk.Port(0)).
		Step("c", sdk.After("zzz")).
		Step("d", sdk.Run(nop), sdk.Timeout(time.Millisecond), sdk.Env("MANIFOLD_X", "1"))
	opts := compile.Options{Params: map[string]string{"epoch": "4"}}
	wantErrs(t, f, opts, field.ErrorList{
		field.NotFound(field.NewPath("params").Key("epoch"), nil),
		field.Invalid(field.NewPath("schedule"), nil, ""),
		field.Invalid(stepAt("a").Child("trainium"), nil, ""),
		field.Invalid(stepAt("b").Child("efa"), nil, ""),
		field.Invalid(stepAt("b").Child("port"), nil, ""),
		field.Required(stepAt("c").Child("run"), ""),
		field.NotFound(stepAt("c").Child("after").Index(0), nil),
		field.Forbidden(stepAt("d").Child("env").Key("MANIFOLD_X"), ""),
		field.Invalid(stepAt("d").Child("timeout"), nil, ""),
	})
}

func TestFlowDefaultErrorReportedOnce(t *testing.T) {
	f := sdk.NewFlow("f", sdk.Image(img), sdk.Trainium(0), sdk.ImagePullPolicy("Sometimes")).
		Step("a", sdk.Command("true")).
		Step("b", sdk.Command("true")).
		Step("c", sdk.Command("true"), sdk.Retry(-1))
	wantErrs(t, f, compile.Options{}, field.ErrorList{
		field.Invalid(field.NewPath("flow", "trainium"), nil, ""),
		field.NotSupported[string](field.NewPath("flow", "imagePullPolicy"), nil, nil),
		field.Invalid(stepAt("c").Child("retry"), nil, ""),
	})
}

func TestParams(t *testing.T) {
	for _, tc := range []struct {
		name   string
		params []sdk.FlowOption
		given  map[string]string
		want   []plan.Param
	}{
		{name: "none"},
		{
			name:   "defaults in declaration order",
			params: []sdk.FlowOption{sdk.Param("learning-rate", "0.1"), sdk.Param("epochs", "3")},
			want: []plan.Param{
				{Name: "learning-rate", Value: "0.1", Env: "MANIFOLD_PARAM_LEARNING_RATE"},
				{Name: "epochs", Value: "3", Env: "MANIFOLD_PARAM_EPOCHS"},
			},
		},
		{
			name:   "given value overrides the default",
			params: []sdk.FlowOption{sdk.Param("epochs", "3"), sdk.Param("batch", "8")},
			given:  map[string]string{"epochs": "10"},
			want: []plan.Param{
				{Name: "epochs", Value: "10", Env: "MANIFOLD_PARAM_EPOCHS"},
				{Name: "batch", Value: "8", Env: "MANIFOLD_PARAM_BATCH"},
			},
		},
		{
			name:   "given empty value",
			params: []sdk.FlowOption{sdk.Param("tag", "latest")},
			given:  map[string]string{"tag": ""},
			want:   []plan.Param{{Name: "tag", Value: "", Env: "MANIFOLD_PARAM_TAG"}},
		},
		{
			name:   "upper case and underscores",
			params: []sdk.FlowOption{sdk.Param("Batch_Size", "8")},
			want:   []plan.Param{{Name: "Batch_Size", Value: "8", Env: "MANIFOLD_PARAM_BATCH_SIZE"}},
		},
		{
			name:   "a later param of the same name replaces the default",
			params: []sdk.FlowOption{sdk.Param("epochs", "3"), sdk.Param("epochs", "5")},
			want:   []plan.Param{{Name: "epochs", Value: "5", Env: "MANIFOLD_PARAM_EPOCHS"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := sdk.NewFlow("f", append([]sdk.FlowOption{sdk.Image(img)}, tc.params...)...).Step("s", sdk.Command("true"))
			p := mustCompile(t, f, compile.Options{Params: tc.given})
			if diff := cmp.Diff(tc.want, p.Params, planOpts); diff != "" {
				t.Errorf("params (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParamErrors(t *testing.T) {
	params := field.NewPath("params")
	withParams := func(ps ...sdk.FlowOption) *sdk.Flow {
		return sdk.NewFlow("f", append([]sdk.FlowOption{sdk.Image(img)}, ps...)...).Step("s", sdk.Command("true"))
	}
	runErrorCases(t, []errorCase{
		{
			name:    "unknown given param",
			flow:    withParams(sdk.Param("epochs", "3"), sdk.Param("seed", "1")),
			opts:    compile.Options{Params: map[string]string{"epoch": "4"}},
			want:    field.ErrorList{field.NotFound(params.Key("epoch"), nil)},
			details: []string{"the flow's params are epochs, seed; did you mean epochs?"},
		},
		{
			name:    "unknown given param, near none",
			flow:    withParams(sdk.Param("epochs", "3")),
			opts:    compile.Options{Params: map[string]string{"zzz": "4"}},
			want:    field.ErrorList{field.NotFound(params.Key("zzz"), nil)},
			details: []string{"the flow's params are epochs"},
		},
		{
			name: "unknown given params, in name order",
			flow: withParams(),
			opts: compile.Options{Params: map[string]string{"z": "1", "a": "2"}},
			want: field.ErrorList{field.NotFound(params.Key("a"), nil), field.NotFound(params.Key("z"), nil)},
		},
		{
			name:    "dash and underscore collide",
			flow:    withParams(sdk.Param("a-b", "1"), sdk.Param("a_b", "2")),
			want:    field.ErrorList{field.Duplicate(params.Key("a_b"), nil)},
			details: []string{`params "a-b" and "a_b" would both be the variable MANIFOLD_PARAM_A_B: rename one of them`},
		},
		{
			name:    "case collides",
			flow:    withParams(sdk.Param("epochs", "1"), sdk.Param("EPOCHS", "2")),
			want:    field.ErrorList{field.Duplicate(params.Key("EPOCHS"), nil)},
			details: []string{"rename one of them"},
		},
		{
			name: "starts with a digit",
			flow: withParams(sdk.Param("1st", "1")),
			want: field.ErrorList{field.Invalid(params.Key("1st"), nil, "")},
		},
		{
			name: "space",
			flow: withParams(sdk.Param("my param", "1")),
			want: field.ErrorList{field.Invalid(params.Key("my param"), nil, "")},
		},
		{
			name: "empty",
			flow: withParams(sdk.Param("", "1")),
			want: field.ErrorList{field.Invalid(params.Key(""), nil, "")},
		},
		{
			name: "too long",
			flow: withParams(sdk.Param(strings.Repeat("p", 65), "1")),
			want: field.ErrorList{field.Invalid(params.Key(strings.Repeat("p", 65)), nil, "")},
		},
	})
}

func TestSchedule(t *testing.T) {
	for _, tc := range []struct{ cron, want string }{
		{"0 3 * * *", "0 3 * * *"},
		{"@daily", "@daily"},
		{"*/15 * * * 1-5", "*/15 * * * 1-5"},
		{"  0 3 * * *\n", "0 3 * * *"},
	} {
		t.Run(tc.cron, func(t *testing.T) {
			f := sdk.NewFlow("f", sdk.Image(img), sdk.Schedule(tc.cron)).Step("s", sdk.Command("true"))
			if got := mustCompile(t, f, compile.Options{}).Schedule; got != tc.want {
				t.Errorf("Schedule = %q, want %q", got, tc.want)
			}
		})
	}
	t.Run("none", func(t *testing.T) {
		if got := mustCompile(t, one(), compile.Options{}).Schedule; got != "" {
			t.Errorf("Schedule = %q, want none", got)
		}
	})
}

func TestScheduleErrors(t *testing.T) {
	scheduled := func(cron string) *sdk.Flow {
		return sdk.NewFlow("f", sdk.Image(img), sdk.Schedule(cron)).Step("s", sdk.Command("true"))
	}
	at := field.NewPath("schedule")
	runErrorCases(t, []errorCase{
		{name: "minute out of range", flow: scheduled("61 * * * *"), want: field.ErrorList{field.Invalid(at, nil, "")}},
		{name: "words", flow: scheduled("every day"), want: field.ErrorList{field.Invalid(at, nil, "")}},
		{name: "four fields", flow: scheduled("* * * *"), want: field.ErrorList{field.Invalid(at, nil, "")}},
		{name: "six fields", flow: scheduled("0 0 3 * * *"), want: field.ErrorList{field.Invalid(at, nil, "")}},
		{name: "unknown descriptor", flow: scheduled("@fortnightly"), want: field.ErrorList{field.Invalid(at, nil, "")}},
		{name: "time zone without a schedule", flow: scheduled("TZ=UTC"), want: field.ErrorList{field.Invalid(at, nil, "")}},
		{name: "time zone", flow: scheduled("CRON_TZ=Europe/Paris 0 3 * * *"), want: field.ErrorList{field.Invalid(at, nil, "")}},
		{name: "empty", flow: scheduled(""), want: field.ErrorList{field.Required(at, "")}},
	})
}

func TestOverrides(t *testing.T) {
	f := sdk.NewFlow("f", sdk.Image(img)).
		Step("train", sdk.Command("true"), sdk.Trainium(4), sdk.InstanceType("trn1n.32xlarge"), sdk.EFAAll()).
		Step("other", sdk.Command("true"), sdk.Trainium(4))
	o := compile.Options{Overrides: map[string][]sdk.StepOption{
		"train": {sdk.Trainium(2), sdk.InstanceType("trn1.32xlarge"), sdk.Trainium(16), sdk.EFA(8), sdk.Image("other:v2")},
	}}
	p := mustCompile(t, f, o)
	train := p.Step("train")
	if train.Neuron != 16 || train.EFA != 8 || train.InstanceType != "trn1.32xlarge" || train.Image != "other:v2" {
		t.Errorf("train: Neuron %d, EFA %d, InstanceType %q, Image %q; want 16, 8, trn1.32xlarge, other:v2",
			train.Neuron, train.EFA, train.InstanceType, train.Image)
	}
	if other := p.Step("other"); other.Neuron != 4 || other.Image != img {
		t.Errorf("other: Neuron %d, Image %q; an override of train changed it", other.Neuron, other.Image)
	}
	// The flow itself is not changed by an override.
	p = mustCompile(t, f, compile.Options{})
	if got := p.Step("train"); got.Neuron != 4 || got.EFA != 16 {
		t.Errorf("after an override, train compiles to Neuron %d, EFA %d; want 4, 16", got.Neuron, got.EFA)
	}
}

func TestOverrideErrors(t *testing.T) {
	runErrorCases(t, []errorCase{
		{
			name:    "trainium zero by override, over no trainium",
			flow:    one(sdk.EFA(8)),
			opts:    compile.Options{Overrides: map[string][]sdk.StepOption{"s": {sdk.Trainium(0)}}},
			want:    field.ErrorList{field.Invalid(sAt("trainium"), nil, "")},
			details: []string{"--set s.trainium=0"},
		},
		{
			name: "trainium and inferentia in one override",
			flow: one(sdk.Trainium(16)),
			opts: compile.Options{Overrides: map[string][]sdk.StepOption{"s": {sdk.Trainium(1), sdk.Inferentia(1)}}},
			want: field.ErrorList{field.Forbidden(sAt("inferentia"), "")},
		},
		{
			name:    "unknown step",
			flow:    one(),
			opts:    compile.Options{Overrides: map[string][]sdk.StepOption{"nope": {sdk.Trainium(1)}}},
			want:    field.ErrorList{field.NotFound(field.NewPath("set").Key("nope"), nil)},
			details: []string{"s"},
		},
	})
}
