package compile_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/harness/benchflow"
	"github.com/manifoldflow/manifold/sdk"
)

func TestLint(t *testing.T) {
	trn1 := []sdk.StepOption{sdk.InstanceType("trn1.32xlarge"), sdk.Trainium(16)}
	for _, tc := range []struct {
		name string
		opts []sdk.StepOption
		// want maps each warning's field to a phrase its detail must hold.
		want map[string]string
	}{{
		name: "multi-node Trainium on an EFA instance without EFA",
		opts: append(trn1, sdk.Nodes(2)),
		want: map[string]string{"steps[s].efa": "over TCP"},
	}, {
		name: "multi-node GPUs on an EFA instance without EFA",
		opts: []sdk.StepOption{sdk.InstanceType("p5.48xlarge"), sdk.GPU(8), sdk.Nodes(4)},
		want: map[string]string{"steps[s].efa": "all 32 interfaces"},
	}, {
		name: "one node without EFA is fine",
		opts: trn1,
	}, {
		name: "several nodes of an instance type without EFA is fine",
		opts: []sdk.StepOption{sdk.InstanceType("inf2.48xlarge"), sdk.Inferentia(12), sdk.Nodes(2)},
	}, {
		name: "EFA without wiring",
		opts: append(trn1, sdk.EFA(8)),
		want: map[string]string{"steps[s].efaWiring": "add sdk.EFAWiring()"},
	}, {
		name: "EFA with wiring",
		opts: append(trn1, sdk.EFA(8), sdk.EFAWiring()),
	}, {
		name: "EFA wired by hand",
		opts: append(trn1, sdk.EFA(8), sdk.Env("FI_PROVIDER", "efa")),
	}, {
		name: "FI_PROVIDER=efa without EFA",
		opts: []sdk.StepOption{sdk.Env("FI_PROVIDER", "efa")},
		want: map[string]string{"steps[s].env[FI_PROVIDER]": "asks for no EFA"},
	}, {
		name: "another provider without EFA is fine",
		opts: []sdk.StepOption{sdk.Env("FI_PROVIDER", "tcp")},
	}, {
		name: "multi-node EFA on any instance family",
		opts: []sdk.StepOption{sdk.GPU(8), sdk.EFA(4), sdk.EFAWiring(), sdk.Nodes(2)},
		want: map[string]string{"steps[s].instanceType": "p4d and p4de"},
	}, {
		name: "multi-node EFA pinned to a family",
		opts: []sdk.StepOption{sdk.GPU(8), sdk.EFA(4), sdk.EFAWiring(), sdk.Nodes(2), sdk.NodeSelector("karpenter.k8s.aws/instance-family", "p4d")},
	}, {
		name: "multi-node EFA pinned to an instance type",
		opts: append(trn1, sdk.EFAAll(), sdk.EFAWiring(), sdk.Nodes(4)),
	}} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustCompile(t, one(tc.opts...), compile.Options{})
			got := map[string]string{}
			for _, w := range compile.Lint(p) {
				got[w.Field] = w.Detail
				if !strings.HasPrefix(w.Error(), w.Field+": ") {
					t.Errorf("Error() %q does not start with the field", w.Error())
				}
			}
			fields := func(m map[string]string) []string {
				var out []string
				for k := range m {
					out = append(out, k)
				}
				return out
			}
			if diff := cmp.Diff(fields(tc.want), fields(got), cmpopts.SortSlices(func(a, b string) bool { return a < b }), cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("warnings (-want +got):\n%s\ngot: %v", diff, got)
			}
			for field, phrase := range tc.want {
				if !strings.Contains(got[field], phrase) {
					t.Errorf("%s: %q does not say %q", field, got[field], phrase)
				}
			}
		})
	}
}

func TestLintShellScripts(t *testing.T) {
	param := func() *sdk.Flow {
		return sdk.NewFlow("f", sdk.Image(img), sdk.Param("name", "world"), sdk.Param("max-len", "8"))
	}
	for _, tc := range []struct {
		name string
		flow *sdk.Flow
		// want maps each warning's field to phrases its detail must hold.
		want map[string][]string
	}{{
		name: "a param in sh -c's script",
		flow: param().Step("echo", sdk.Command("sh", "-c", `echo "hello, $(MANIFOLD_PARAM_NAME)"`)),
		want: map[string][]string{"steps[echo].command[2]": {"$(MANIFOLD_PARAM_NAME)", `"$MANIFOLD_PARAM_NAME"`}},
	}, {
		name: "two references in one script, one warning",
		flow: param().Step("echo", sdk.Command("/bin/bash", "-euc", `echo $(MANIFOLD_PARAM_NAME) $(MANIFOLD_PARAM_MAX_LEN) $(MANIFOLD_PARAM_NAME)`)),
		want: map[string][]string{"steps[echo].command[2]": {`"$MANIFOLD_PARAM_NAME"`, `"$MANIFOLD_PARAM_MAX_LEN"`}},
	}, {
		name: "busybox sh with options before -c",
		flow: param().Step("echo", sdk.Command("busybox", "sh", "-e", "-o", "pipefail", "-c", "echo $(MANIFOLD_PARAM_NAME)")),
		want: map[string][]string{"steps[echo].command[6]": {`"$MANIFOLD_PARAM_NAME"`}},
	}, {
		name: "the item and index of a foreach step",
		flow: sdk.NewFlow("f", sdk.Image(img)).Step("fan", sdk.Foreach("a", "b"), sdk.Command("dash", "-c", "sync $(MANIFOLD_ITEM) $(MANIFOLD_INDEX)")),
		want: map[string][]string{"steps[fan].command[2]": {`"$MANIFOLD_ITEM"`, `"$MANIFOLD_INDEX"`}},
	}, {
		name: "the step's own variables and a Secret's",
		flow: one(sdk.Env("TARGET", "x"), sdk.SecretEnv("TOKEN", "api", "token"), sdk.Command("zsh", "-c", "push $(TARGET) $(TOKEN)")),
		want: map[string][]string{"steps[s].command[2]": {`"$TARGET"`, `"$TOKEN"`}},
	}, {
		name: "ksh and ash through env",
		flow: param().Step("a", sdk.Command("/usr/bin/env", "ksh", "-c", "echo $(MANIFOLD_PARAM_NAME)")).
			Step("b", sdk.Command("ash", "-xc", "echo $(MANIFOLD_PARAM_NAME)")).
			Step("c", sdk.Command("env", "-i", "LANG=C", "bash", "--norc", "-c", "echo $(MANIFOLD_PARAM_NAME)")),
		want: map[string][]string{"steps[a].command[3]": {`"$MANIFOLD_PARAM_NAME"`}, "steps[b].command[2]": {`"$MANIFOLD_PARAM_NAME"`}, "steps[c].command[6]": {`"$MANIFOLD_PARAM_NAME"`}},
	}, {
		name: "the variable read by the shell is safe",
		flow: param().Step("echo", sdk.Command("sh", "-c", `echo "hello, $MANIFOLD_PARAM_NAME"`)),
	}, {
		name: "an argument after the script is the shell's $1, not its text",
		flow: param().Step("echo", sdk.Command("sh", "-c", `echo "$1"`, "sh", "$(MANIFOLD_PARAM_NAME)")),
	}, {
		name: "a reference outside a shell is one argument",
		flow: param().Step("echo", sdk.Command("echo", "-c", "$(MANIFOLD_PARAM_NAME)")),
	}, {
		name: "a shell without -c runs a file",
		flow: param().Step("echo", sdk.Command("sh", "run.sh", "$(MANIFOLD_PARAM_NAME)")),
	}, {
		name: "a command substitution and an escaped reference are the shell's",
		flow: param().Step("echo", sdk.Command("sh", "-c", "echo $(date) $$(MANIFOLD_PARAM_NAME) $(MANIFOLD_ITEM)")),
	}} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustCompile(t, tc.flow, compile.Options{})
			got := map[string]string{}
			for _, w := range compile.Lint(p) {
				got[w.Field] = w.Detail
			}
			var want, fields []string
			for k := range tc.want {
				want = append(want, k)
			}
			for k := range got {
				fields = append(fields, k)
			}
			if diff := cmp.Diff(want, fields, cmpopts.SortSlices(func(a, b string) bool { return a < b }), cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("warnings (-want +got):\n%s\ngot: %v", diff, got)
			}
			for field, phrases := range tc.want {
				for _, phrase := range phrases {
					if !strings.Contains(got[field], phrase) {
						t.Errorf("%s: %q does not say %q", field, got[field], phrase)
					}
				}
			}
		})
	}
}

// Credentials made up for these tests, in the shapes of real ones.
const (
	keyID     = "AKIA" + "Z7Q4M2XK9PLR3TWB"
	awsSecret = "q8Zr3kX/7vLm2+Pw9TnB4yHc6JdF1sGa0eUoRiWx"
	jwt       = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ0cmFpbmVyIn0.c2lnbmF0dXJlLW9mLXRoZS10b2tlbg"
)

func TestLintCredentials(t *testing.T) {
	digest := "registry.example.com/ml/flow@sha256:3b1c9e8f0a7d2c4b6e5f1a0d9c8b7a6e5f4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b"
	for _, tc := range []struct {
		name   string
		flow   *sdk.Flow
		config compile.Config
		params map[string]string
		// want maps each warning's field to a phrase its detail must hold.
		want map[string]string
	}{{
		name: "AWS keys in a step's env",
		flow: one(sdk.Env("AWS_ACCESS_KEY_ID", keyID), sdk.Env("AWS_SECRET_ACCESS_KEY", awsSecret)),
		want: map[string]string{
			"steps[s].env[AWS_ACCESS_KEY_ID]":     `AKIA…`,
			"steps[s].env[AWS_SECRET_ACCESS_KEY]": `sdk.SecretEnv("AWS_SECRET_ACCESS_KEY", secret, key)`,
		},
	}, {
		name: "the same keys from Secrets",
		flow: one(sdk.SecretEnv("AWS_ACCESS_KEY_ID", "aws", "id"), sdk.SecretEnv("AWS_SECRET_ACCESS_KEY", "aws", "key"), sdk.Secret("hf")),
	}, {
		name: "a flow default, once for every step",
		flow: sdk.NewFlow("f", sdk.Image(img), sdk.Env("HF_TOKEN", "hf_"+"AbCdEfGhIjKlMnOpQrStUvWxYz01234567")).
			Step("a", sdk.Command("true")).Step("b", sdk.Command("true")).Step("c", sdk.Command("true")),
		want: map[string]string{"steps[a].env[HF_TOKEN]": "steps b, c hold the same value"},
	}, {
		name:   "manifold.toml's env",
		flow:   one(),
		config: compile.Config{Env: map[string]string{"AWS_SECRET_ACCESS_KEY": awsSecret}},
		want:   map[string]string{"steps[s].env[AWS_SECRET_ACCESS_KEY]": "manifold.toml's secrets"},
	}, {
		name: "labels and annotations",
		flow: one(sdk.Label("owner-key", keyID), sdk.Annotation("example.com/auth", "Bearer 3f9a7c1e5b2d4a6f")),
		want: map[string]string{
			"steps[s].labels[owner-key]":             "list pods",
			"steps[s].annotations[example.com/auth]": "bearer token",
		},
	}, {
		name: "a command line",
		flow: sdk.NewFlow("f").Step("s", sdk.Image(img), sdk.Command("aws", "s3", "sync", "--aws-secret-access-key", awsSecret, "-H", "Authorization: Bearer "+jwt)),
		want: map[string]string{
			"steps[s].command[4]": "write $(name) in the command",
			"steps[s].command[6]": "looks like",
		},
	}, {
		name: "a command that reads the secret from a variable",
		flow: sdk.NewFlow("f").Step("s", sdk.Image(img), sdk.SecretEnv("TOKEN", "api", "token"),
			sdk.Command("curl", "-H", "Authorization: Bearer $(TOKEN)", "https://api.example.com")),
	}, {
		name: "foreach items",
		flow: one(sdk.Foreach("a", jwt)),
		want: map[string]string{"steps[s].foreach[1]": "JSON Web Token"},
	}, {
		name:   "a param's default and --param",
		flow:   sdk.NewFlow("f", sdk.Param("token", "none"), sdk.Param("key", keyID)).Step("s", sdk.Image(img), sdk.Command("true")),
		params: map[string]string{"token": "AbCdEfGhIjKlMnOpQrStUv0123"},
		want:   map[string]string{"params[token]": "not as a param", "params[key]": "AKIA…"},
	}, {
		name: "near misses",
		flow: sdk.NewFlow("f", sdk.Param("run", "20261205T141500Z-3f9a7c")).Step("s", sdk.Image(digest),
			sdk.Env("GIT_COMMIT", "3b1c9e8f0a7d2c4b6e5f1a0d9c8b7a6e5f4d3c2b"), sdk.Env("MAX_TOKENS", "4096"),
			sdk.Env("REQUEST_ID", "0f8fad5b-d9cb-469f-a165-70867728950e"), sdk.Env("MODEL_SHA", awsSecret),
			sdk.Label("commit", "3b1c9e8f0a7d2c4b6e5f1a0d9c8b7a6e5f4d3c2b"),
			sdk.Command("train", "--tokenizer", "meta-llama/Llama-3.1-8B-Instruct", "--max-tokens", "4096")),
	}} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustCompile(t, tc.flow, compile.Options{Config: tc.config, Params: tc.params})
			got := map[string]string{}
			for _, w := range compile.Lint(p) {
				got[w.Field] = w.Detail
				for _, secret := range []string{keyID, awsSecret, jwt, "3f9a7c1e5b2d4a6f", "AbCdEfGhIjKlMnOpQrStUv0123", "hf_AbCd"} {
					if strings.Contains(w.Error(), secret) {
						t.Errorf("%s: the warning holds the value", w.Error())
					}
				}
			}
			var wantFields, gotFields []string
			for f := range tc.want {
				wantFields = append(wantFields, f)
			}
			for f := range got {
				gotFields = append(gotFields, f)
			}
			if diff := cmp.Diff(wantFields, gotFields, cmpopts.SortSlices(func(a, b string) bool { return a < b }), cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("warnings (-want +got):\n%s\ngot: %v", diff, got)
			}
			for field, phrase := range tc.want {
				if !strings.Contains(got[field], phrase) {
					t.Errorf("%s: %q does not say %q", field, got[field], phrase)
				}
			}
		})
	}
}

// TestCompileErrorsWithholdCredentials: an error prints the value at fault, but
// not a credential.
func TestCompileErrorsWithholdCredentials(t *testing.T) {
	_, errs := compile.Compile(one(sdk.Label("aws-secret-access-key", awsSecret), sdk.Annotation("bad key", keyID)), compile.Options{})
	if len(errs) == 0 {
		t.Fatal("a label value with '/' compiled")
	}
	for _, e := range errs {
		if strings.Contains(e.Error(), awsSecret) || strings.Contains(e.Error(), keyID) {
			t.Errorf("%s: holds the credential", e.Error())
		}
	}
}

// BenchmarkLint lints a generated flow of 10,000 steps, as compile and validate
// do after every compile; it reports ns/step.
func BenchmarkLint(b *testing.B) {
	p, errs := compile.Compile(benchflow.Flow(benchflow.Chain, 10000, benchflow.Options{}), compile.Options{})
	if len(errs) > 0 {
		b.Fatal(errs.ToAggregate())
	}
	b.ReportAllocs()
	for b.Loop() {
		compile.Lint(p)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(p.Steps)), "ns/step")
}
