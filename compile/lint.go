package compile

import (
	"fmt"
	"path"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/catalog"
	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/internal/credential"
	"github.com/manifoldflow/manifold/internal/expansion"
	"github.com/manifoldflow/manifold/plan"
)

// Warning is a flow that compiles but will likely not do what its author meant,
// such as training over TCP on a fabric that offers EFA. validate and compile
// print warnings; with --strict they are errors.
type Warning struct {
	// Field is the option's path, as in errors: steps[train].efa.
	Field string
	// Detail says what goes wrong and what to do.
	Detail string
}

func (w Warning) Error() string { return w.Field + ": " + w.Detail }

// Lint returns p's warnings, step by step: EFA that the pod will not use,
// multi-node steps whose traffic takes the slow road, a step's variables
// written as $(NAME) into a shell's script (lintShell), and values that look like
// credentials (an AWS key, a private key, a token) written where every target's
// files, the run records and anyone who can read the pod see them. A warning
// never holds such a value: at most the prefix its kind shares (AKIA…). Then a
// flow without an artifact store whose steps keep or read artifacts
// (lintArtifacts).
func Lint(p *plan.Flow) []Warning {
	var out []Warning
	for i := range p.Steps {
		out = append(out, lintStep(&p.Steps[i])...)
		out = append(out, lintShell(p, &p.Steps[i])...)
	}
	out = append(out, lintCredentials(p)...)
	return append(out, lintArtifacts(p)...)
}

// NoStoreAdvice says how to give a flow an artifact store, and what each kind
// is: the advice of the warning of a flow without one and of the error of a
// Put or Get in a pod without one.
const NoStoreAdvice = "give the flow an artifact store that every pod reaches: --artifacts s3://bucket/prefix (an S3 bucket and prefix; with --artifacts-endpoint URL, an S3-compatible server such as MinIO), --artifacts pvc://CLAIM (a ReadWriteMany PersistentVolumeClaim that every pod mounts), the same as artifacts = \"s3://bucket/prefix\" in manifold.toml (for every command), or sdk.ArtifactVolume(\"CLAIM\") in the flow's code"

// storeVars are the variables through which a Command step reaches the
// artifact store; a pod of a flow without a store has none of them.
var storeVars = []string{plan.EnvArtifacts, plan.EnvRunDir, plan.EnvArtifactStore}

// maxNamed bounds the steps a warning names; it counts the others.
const maxNamed = 5

// lintArtifacts warns of a flow without an artifact store that has steps that
// keep or read artifacts: Run steps, whose Go code may call ctx.Put and ctx.Get
// (but those that say with sdk.NoArtifacts that they do not), and Command steps
// whose command or variables name MANIFOLD_ARTIFACTS, MANIFOLD_RUN_DIR or
// MANIFOLD_ARTIFACT_STORE. On a cluster each pod has only its own file system,
// and none of those variables. Every target runs pods on a cluster, so
// compile and validate lint every flow; a local run, which keeps artifacts in
// its run directory, does not.
func lintArtifacts(p *plan.Flow) []Warning {
	if p.Artifacts != nil {
		return nil
	}
	var runNamed, cmdNamed []string
	more, runs, commands := 0, 0, 0
	name := func(list *[]string, s string) {
		if len(runNamed)+len(cmdNamed) == maxNamed {
			more++
			return
		}
		*list = append(*list, s)
	}
	for i := range p.Steps {
		s := &p.Steps[i]
		at := field.NewPath("steps").Key(s.Name)
		if s.Body == plan.BodyRun {
			if !s.NoArtifacts {
				runs++
				name(&runNamed, at.String())
			}
			continue
		}
		refers := func(path *field.Path, value string) {
			for _, v := range storeVars {
				if strings.Contains(value, v) {
					commands++
					name(&cmdNamed, path.String()+" ("+v+")")
					return
				}
			}
		}
		for j, arg := range s.Command {
			refers(at.Child("command").Index(j), arg)
		}
		for _, e := range s.Env {
			if e.SecretName == "" {
				refers(at.Child("env").Key(e.Name), e.Value)
			}
		}
	}
	if runs+commands == 0 {
		return nil
	}
	var parts []string
	switch {
	case len(runNamed) == 1 && runs == 1:
		parts = append(parts, "its Run step "+runNamed[0])
	case len(runNamed) > 0:
		parts = append(parts, "its Run steps ("+strings.Join(runNamed, ", ")+")")
	}
	parts = append(parts, cmdNamed...)
	list := strings.Join(parts, ", ")
	if more > 0 {
		list += fmt.Sprintf(" and %d more", more)
	}
	var why []string
	if runs > 0 {
		why = append(why, "each pod has only its own disk, which no other step's pod sees, so a Run step's ctx.Put and ctx.Get fail there")
	}
	if commands > 0 {
		why = append(why, "the pods have no "+strings.Join(storeVars, ", ")+": a $("+plan.EnvArtifacts+") in a command or variable stays literal text, and a shell's $"+plan.EnvArtifacts+" is empty")
	}
	verb := " keep or read"
	if runs+commands == 1 {
		verb = " keeps or reads"
	}
	detail := "the flow has no artifact store, but " + list + verb + " artifacts: on a cluster " + strings.Join(why, "; ") + "; " + NoStoreAdvice
	if runs > 0 {
		detail += "; a Run step that puts and gets nothing says so with sdk.NoArtifacts()"
	}
	return []Warning{{Field: field.NewPath("artifacts").String(), Detail: detail}}
}

func lintStep(s *plan.Step) []Warning {
	at := field.NewPath("steps").Key(s.Name)
	var out []Warning
	warn := func(path *field.Path, format string, args ...any) {
		out = append(out, Warning{Field: path.String(), Detail: fmt.Sprintf(format, args...)})
	}
	provider, providerSet := ownEnv(s, envFIProvider)
	inst, known := catalog.Lookup(s.InstanceType)
	accelerated := s.Neuron > 0 || s.GPU > 0

	// Training over TCP on an instance made for EFA.
	if s.Nodes > 1 && accelerated && s.EFA == 0 && known && inst.EFA > 0 {
		warn(at.Child("efa"), "a %d-node step on %s asks for no EFA, so its nodes talk over TCP at a fraction of the fabric's bandwidth; add sdk.EFAAll() (all %d interfaces) and sdk.EFAWiring()",
			s.Nodes, s.InstanceType, inst.EFA)
	}
	// EFA in the pod that nothing tells libfabric to use.
	if s.EFA > 0 && s.EFAWiring == nil && !providerSet {
		warn(at.Child("efaWiring"), "the step asks for %d EFA interfaces but sets no %s: unless its image sets the EFA variables itself, libfabric and NCCL fall back to TCP without a word; add sdk.EFAWiring() (or set %s=efa and the rest with sdk.Env)",
			s.EFA, envFIProvider, envFIProvider)
	}
	// The EFA provider without a device to use.
	if providerSet && provider == "efa" && s.EFA == 0 {
		warn(at.Child("env").Key(envFIProvider), "%s=efa, but the step asks for no EFA interfaces: the pod has no EFA device, so libfabric fails or falls back to TCP; add sdk.EFA(n) or sdk.EFAAll(), or leave %s out",
			envFIProvider, envFIProvider)
	}
	// Nodes of families whose EFA does not interoperate.
	if s.Nodes > 1 && s.EFA > 0 && s.InstanceType == "" && !hasSelector(s, plan.LabelInstanceFamily) {
		warn(at.Child("instanceType"), "the %d nodes of an EFA step can be of any instance family, and EFA does not work between some of them (p4d and p4de with any other); pin one with sdk.InstanceType or a node selector on %s",
			s.Nodes, plan.LabelInstanceFamily)
	}
	return out
}

// lintShell warns of the script of a shell's -c (sh -c SCRIPT, bash -euc
// SCRIPT, busybox sh -c SCRIPT…) that holds a $(NAME) of one of the step's
// variables: the kubelet, and the local runtime as it does, replaces it with
// the value in the script's text before the shell parses it, so a param, a
// foreach item or any variable holding a quote, a ; or a $(…) runs as
// commands. The shell reads the variable itself when the script says "$NAME".
func lintShell(p *plan.Flow, s *plan.Step) []Warning {
	if s.Body != plan.BodyCommand {
		return nil
	}
	at := shellScript(s.Command)
	if at < 0 || !strings.Contains(s.Command[at], "$(") {
		return nil
	}
	// The variables of the step's pod, as every target gives them, and those
	// a runtime adds.
	vars := map[string]bool{plan.EnvRunDir: true, plan.EnvArtifacts: true, plan.EnvTraceParent: true}
	var item *emit.Item
	if len(s.Foreach) > 0 {
		item = emit.ItemAt(s, 0)
	}
	for _, e := range emit.Env(p, s, emit.PodOptions{Item: item}) {
		vars[e.Name] = true
	}
	var refs, safe []string
	for _, name := range expansion.References(s.Command[at]) {
		if vars[name] {
			refs = append(refs, "$("+name+")")
			safe = append(safe, `"$`+name+`"`)
		}
	}
	if len(refs) == 0 {
		return nil
	}
	return []Warning{{Field: field.NewPath("steps").Key(s.Name).Child("command").Index(at).String(),
		Detail: fmt.Sprintf("the shell's script holds %s, which the kubelet replaces with the value before the shell parses the script, so a value holding a quote, a ; or a $(…) runs as commands; write %s in the script, which the shell reads from the variable as data",
			strings.Join(refs, ", "), strings.Join(safe, ", "))}}
}

// shells are the programs whose -c runs a script given as an argument.
var shells = map[string]bool{"sh": true, "bash": true, "dash": true, "zsh": true, "ash": true, "ksh": true, "mksh": true}

// shellScript returns the index in argv of the script a shell's -c runs, or
// -1 when argv runs no shell with -c. The shell may be given by a path
// (/bin/sh), through env (env bash, env -i A=1 bash) or busybox (busybox sh); its options come
// before the script, -c alone or among others (-ec, -euxc), -o and -O with
// their argument, long ones (--norc), up to --.
func shellScript(argv []string) int {
	i := 0
	base := func() string { return path.Base(argv[i]) }
	for i < len(argv) && (base() == "env" || base() == "busybox") {
		env := base() == "env"
		i++
		// env's options and NAME=VALUE assignments before the program.
		for env && i < len(argv) && (strings.HasPrefix(argv[i], "-") || strings.Contains(argv[i], "=")) {
			i++
		}
	}
	if i == len(argv) || !shells[base()] {
		return -1
	}
	script := false
	for i++; i < len(argv); i++ {
		a := argv[i]
		if a == "--" {
			i++
			break
		}
		if len(a) < 2 || (a[0] != '-' && a[0] != '+') {
			break
		}
		if strings.HasPrefix(a, "--") {
			continue
		}
		script = script || (a[0] == '-' && strings.ContainsRune(a[1:], 'c'))
		if strings.ContainsAny(a[1:], "oO") {
			i++ // the option's argument
		}
	}
	if !script || i >= len(argv) {
		return -1
	}
	return i
}

// ownEnv returns the value of the step's own plain variable name.
func ownEnv(s *plan.Step, name string) (string, bool) {
	for _, e := range s.Env {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}

func hasSelector(s *plan.Step, key string) bool {
	for _, kv := range s.NodeSelector {
		if kv.Key == key {
			return true
		}
	}
	return false
}

// lintCredentials warns of every plain value of p that looks like a credential:
// param values, and each step's environment, labels, annotations, command and
// foreach items. A value that several steps hold alike (a flow default, or
// manifold.toml's [env]) is one warning, at the first of them.
func lintCredentials(p *plan.Flow) []Warning {
	out := paramCredentials(p)
	seen := map[string]*sharedCredential{}
	// The steps of a flow share most of their values (its defaults, the
	// config's): each name and value is read once.
	type pair struct{ name, value string }
	type result struct {
		c  credential.Credential
		ok bool
	}
	memo := map[pair]result{}
	detect := func(name, value string) (credential.Credential, bool) {
		k := pair{name, value}
		r, done := memo[k]
		if !done {
			r.c, r.ok = credential.Detect(name, value)
			memo[k] = r
		}
		return r.c, r.ok
	}
	for i := range p.Steps {
		s := &p.Steps[i]
		at := field.NewPath("steps").Key(s.Name)
		add := func(path *field.Path, value string, c credential.Credential, advice string) {
			// The same value at the same place in another step: one warning.
			key := strings.TrimPrefix(path.String(), at.String()) + "\x00" + value
			if f, ok := seen[key]; ok {
				f.others = append(f.others, s.Name)
				return
			}
			seen[key] = &sharedCredential{warning: len(out)}
			out = append(out, Warning{Field: path.String(), Detail: c.Looks() + ": " + advice})
		}
		for _, e := range s.Env {
			if e.SecretName != "" {
				continue
			}
			if c, ok := detect(e.Name, e.Value); ok {
				add(at.Child("env").Key(e.Name), e.Value, c, fmt.Sprintf("a plain variable is written into every target's files and shown to anyone who can read the pod; keep the value in a Kubernetes Secret and use sdk.SecretEnv(%q, secret, key), sdk.Secret(secret) for every key of it, or manifold.toml's secrets", e.Name))
			}
		}
		for _, kv := range s.Labels {
			if c, ok := detect(kv.Key, kv.Value); ok {
				add(at.Child("labels").Key(kv.Key), kv.Value, c, labelAdvice)
			}
		}
		for _, kv := range s.Annotations {
			if c, ok := detect(kv.Key, kv.Value); ok {
				add(at.Child("annotations").Key(kv.Key), kv.Value, c, labelAdvice)
			}
		}
		for j := range s.Command {
			if c, ok := credential.InArgs(s.Command, j); ok {
				add(at.Child("command").Index(j), s.Command[j], c, "a command line is written into every target's files and shown to anyone who can read the pod; give the secret to the step as a variable with sdk.SecretEnv(name, secret, key) and write $(name) in the command (\"$name\" in a shell's script)")
			}
		}
		for j, it := range s.Foreach {
			if c, ok := detect("", it); ok {
				add(at.Child("foreach").Index(j), it, c, "foreach items are written into every target's files and the run's record; give the secret to the step with sdk.SecretEnv(name, secret, key) or sdk.Secret(secret), and let the items say which to use")
			}
		}
	}
	for _, f := range seen {
		f.note(out)
	}
	return out
}

// paramCredentials warns of every param whose value looks like a credential.
func paramCredentials(p *plan.Flow) []Warning {
	var out []Warning
	for _, prm := range p.Params {
		if c, ok := credential.Detect(prm.Name, prm.Value); ok {
			out = append(out, Warning{Field: field.NewPath("params").Key(prm.Name).String(),
				Detail: "the value " + c.Looks() + ": a param's value is written into every target's files and the run's record; pass the secret to the steps that need it with sdk.SecretEnv(name, secret, key) or sdk.Secret(secret), not as a param"})
		}
	}
	return out
}

// A sharedCredential is a credential warned of once, at out[warning], that the
// other steps named hold alike at the same place.
type sharedCredential struct {
	warning int
	others  []string
}

// note adds to the warning the steps that hold the same value, if any.
func (f *sharedCredential) note(out []Warning) {
	switch len(f.others) {
	case 0:
	case 1:
		out[f.warning].Detail += fmt.Sprintf(" (step %s holds the same value, likely from the flow's defaults or manifold.toml)", f.others[0])
	default:
		out[f.warning].Detail += fmt.Sprintf(" (steps %s hold the same value, likely from the flow's defaults or manifold.toml)", strings.Join(f.others, ", "))
	}
}

const labelAdvice = "labels and annotations are written into every target's files and shown to anyone who can list pods; keep the value in a Kubernetes Secret and give it to the step with sdk.SecretEnv(name, secret, key) or sdk.Secret(secret)"
