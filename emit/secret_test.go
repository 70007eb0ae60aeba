package emit_test

import (
	"bytes"
	"testing"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/emit/targets"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

// TestSecretsEmitNamesOnly: a flow that takes its credentials from Secrets
// (sdk.SecretEnv, sdk.Secret, manifold.toml's secrets) emits, on every target,
// the Secrets' names and keys and never a value, even when the environment that
// compiles it holds values under the same names (as the local runtime reads them).
func TestSecretsEmitNamesOnly(t *testing.T) {
	values := map[string]string{
		"AWS_ACCESS_KEY_ID":     "AKIA" + "Z7Q4M2XK9PLR3TWB",
		"AWS_SECRET_ACCESS_KEY": "q8Zr3kX/7vLm2+Pw9TnB4yHc6JdF1sGa0eUoRiWx",
		"HF_TOKEN":              "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01234567",
		"WANDB_API_KEY":         "0123456789abcdef0123456789abcdef01234567",
	}
	for name, v := range values {
		t.Setenv(name, v)
	}
	flow := sdk.NewFlow("creds", sdk.Image("registry.example.com/ml/flow:v1"),
		sdk.SecretEnv("AWS_ACCESS_KEY_ID", "aws-credentials", "access-key-id"),
		sdk.SecretEnv("AWS_SECRET_ACCESS_KEY", "aws-credentials", "secret-access-key"),
	).
		Step("prepare", sdk.Command("python", "prepare.py"), sdk.Secret("wandb")).
		Step("shard", sdk.After("prepare"), sdk.Command("python", "shard.py"), sdk.Foreach("a", "b"),
			sdk.SecretEnv("HF_TOKEN", "hugging-face", "token")).
		Step("train", sdk.After("shard"), sdk.Command("torchrun", "train.py"), sdk.Nodes(2),
			sdk.InstanceType("trn1.32xlarge"), sdk.Trainium(16), sdk.EFA(8), sdk.EFAWiring(),
			sdk.SecretEnv("HF_TOKEN", "hugging-face", "token"))
	refs := []string{"aws-credentials", "access-key-id", "secret-access-key", "wandb", "hugging-face", "org-secrets"}

	for _, mode := range []string{plan.ArgoJobSet, plan.ArgoJob} {
		p, errs := compile.Compile(flow, compile.Options{Config: compile.Config{Secrets: []string{"org-secrets"}, ArgoMultiNode: mode}})
		if len(errs) > 0 {
			t.Fatalf("compile: %v", errs.ToAggregate())
		}
		for _, target := range targets.All() {
			files, errs := emit.Files(target, p)
			if len(errs) > 0 {
				t.Fatalf("%s: %v", target.Name(), errs.ToAggregate())
			}
			var all []byte
			for _, f := range files {
				for name, v := range values {
					if bytes.Contains(f.Data, []byte(v)) {
						t.Errorf("%s (argo_multi_node %s): %s holds the value of %s", target.Name(), mode, f.Name, name)
					}
				}
				all = append(all, f.Data...)
			}
			for _, ref := range refs {
				if !bytes.Contains(all, []byte(ref)) {
					t.Errorf("%s (argo_multi_node %s): no file names %q", target.Name(), mode, ref)
				}
			}
		}
	}
}
