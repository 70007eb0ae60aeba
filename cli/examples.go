package cli

import (
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/manifoldflow/manifold/sdk"
)

// exampleRun is the run ID the examples use: run IDs sort by start time.
const exampleRun = "20261202-134026-b17ca4"

// commandExamples returns, by command path (as "runs show"), real
// invocations of each command of program, a program of flow, with its own
// step and param names where the flow has them.
func commandExamples(program string, flow *sdk.Flow) map[string][]string {
	step, runStep, param := "train", "prepare", "epochs=5"
	if flow != nil {
		spec := flow.Spec()
		if len(spec.Steps) > 0 {
			step = spec.Steps[len(spec.Steps)-1].Name
		}
		if s := stepNames(flow, true); len(s) > 0 {
			runStep = s[0]
		}
		if len(spec.Params) > 0 {
			param = spec.Params[0].Name + "=" + spec.Params[0].Default
		}
	}
	p, r := program, exampleRun
	return map[string][]string{
		"": {
			p + "                                  # run the flow on this machine",
			p + " run --kube --context kind-manifold",
			p + " compile --target argo -o out/",
			p + " runs show " + r,
		},
		"run": {
			p + " run --param " + param + " -j 4",
			p + " run --kube --context kind-manifold",
		},
		"resume":      {p + " resume " + r, p + " resume " + r + " --set " + step + ".retry=3"},
		"runs":        {p + " runs list", p + " runs show " + r},
		"runs list":   {p + " runs list", p + " runs list --all", p + " runs list --target argo --context prod"},
		"runs show":   {p + " runs show " + r, p + " runs show " + r + " --artifacts"},
		"compile":     {p + " compile --target argo -o out/", p + " compile --target all -o out/ --param " + param},
		"validate":    {p + " validate", p + " validate --target all --strict", p + " validate --set " + step + ".retry=3"},
		"graph":       {p + " graph", p + " graph --format dot | dot -Tsvg > flow.svg"},
		"step":        {p + " step " + runStep, p + " step " + runStep + " --param " + param},
		"check":       {p + " check --context kind-manifold", p + " check --rbac"},
		"image":       {p + " image build --push --tag registry.example.com/ml/" + p + ":v1"},
		"image build": {p + " image build --push --tag registry.example.com/ml/" + p + ":v1", p + " image build --kind manifold"},
		"kind":        {p + " kind up --simulate trn1.32xlarge=2 --with jobset", p + " kind down"},
		"kind up":     {p + " kind up --simulate trn1.32xlarge=2 --with jobset", p + " kind up --print-config"},
		"kind load":   {p + " kind load registry.example.com/ml/" + p + ":v1", p + " kind load flow.tar --name dev"},
		"kind down":   {p + " kind down", p + " kind down --name dev"},
		"artifact":    {p + " artifact get " + r + " " + runStep + " result"},
		"artifact get": {
			p + " artifact get " + r + " " + runStep + " result",
			p + " artifact get " + r + " " + runStep + " result --index 2 -o result.json",
		},
		"logs":       {p + " logs " + r, p + " logs " + r + " " + step + " --attempt 2"},
		"deploy":     {p + " deploy --target argo --image-from-build", p + " deploy --target airflow --dags-folder dags/ --wait-parsed"},
		"undeploy":   {p + " undeploy --target argo", p + " undeploy --target airflow --dags-folder dags/ --delete-dag"},
		"trigger":    {p + " trigger --target argo --wait", p + " trigger --target airflow --param " + param},
		"stop":       {p + " stop --target argo " + p + "-x7k2p"},
		"suspend":    {p + " suspend --target argo " + p + "-x7k2p"},
		"unsuspend":  {p + " unsuspend --target argo " + p + "-x7k2p"},
		"retry":      {p + " retry --target argo --wait " + p + "-x7k2p"},
		"version":    {p + " version", p + " --version", p + " version -o json"},
		"completion": {"source <(" + p + " completion bash)", p + " completion fish > ~/.config/fish/completions/" + p + ".fish"},
	}
}

// addExamples appends to the app's description, and to that of each of its
// commands, the examples of commandExamples (the app's under "").
func addExamples(app *ucli.App, examples map[string][]string) {
	app.Description = withExamples(app.Description, examples[""])
	var walk func(cmds []*ucli.Command, prefix string)
	walk = func(cmds []*ucli.Command, prefix string) {
		for _, c := range cmds {
			path := strings.TrimPrefix(prefix+" "+c.Name, " ")
			c.Description = withExamples(c.Description, examples[path])
			walk(c.Subcommands, path)
		}
	}
	walk(app.Commands, "")
}

// withExamples is description followed by examples, if any.
func withExamples(description string, examples []string) string {
	if len(examples) == 0 {
		return description
	}
	if description != "" {
		description += "\n\n"
	}
	return description + "Examples:\n  " + strings.Join(examples, "\n  ")
}
