package kube_test

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/harness/yamlload"
	"github.com/manifoldflow/manifold/runtimes/kube"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/sdk"
)

// rbacFlow is a step, then a two-node step: a run of it as Jobs creates Jobs and
// a headless Service.
func rbacFlow() *sdk.Flow {
	return sdk.NewFlow("kube-rbac", sdk.Image("example.com/flow:v1")).
		Step("prepare", sdk.Command("prepare")).
		Step("train", sdk.After("prepare"), sdk.Command("torchrun", "train.py"),
			sdk.Nodes(2), sdk.InstanceType("trn1.32xlarge"), sdk.Trainium(16))
}

// parseRBAC reads what kube.RBAC printed, strictly: one Role, then one
// ClusterRole, each rule after a comment that says why.
func parseRBAC(t *testing.T, data []byte) (*rbacv1.Role, *rbacv1.ClusterRole) {
	t.Helper()
	docs := strings.Split(string(data), "\n---\n")
	if len(docs) != 3 || strings.Contains(docs[0], "\n ") || !strings.HasPrefix(docs[0], "#") {
		t.Fatalf("want a comment, a Role and a ClusterRole; got:\n%s", data)
	}
	var role rbacv1.Role
	var cr rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict([]byte(docs[1]), &role); err != nil {
		t.Fatalf("the Role: %v\n%s", err, docs[1])
	}
	if err := yaml.UnmarshalStrict([]byte(docs[2]), &cr); err != nil {
		t.Fatalf("the ClusterRole: %v\n%s", err, docs[2])
	}
	if role.Kind != "Role" || cr.Kind != "ClusterRole" || role.APIVersion != rbacv1.SchemeGroupVersion.String() {
		t.Fatalf("kinds %s %s, apiVersion %s", role.Kind, cr.Kind, role.APIVersion)
	}
	for _, doc := range docs[1:] {
		lines := strings.Split(doc, "\n")
		for i, l := range lines {
			if strings.HasPrefix(l, "  - ") && (i == 0 || !strings.HasPrefix(lines[i-1], "  # to ")) {
				t.Errorf("rule %q has no comment saying why", l)
			}
		}
	}
	return &role, &cr
}

// TestRBACRole prints the RBAC a run needs, creates it on the API server (which
// validates it), runs the flow as a user bound to exactly that, and then takes
// away each verb of each rule in turn: the preflight then refuses the run with
// one line naming the verb, the resource and what needs it, or, for what the
// run does without, notes it.
func TestRBACRole(t *testing.T) {
	c := simcluster.Shared(t)
	ctx := context.Background()
	for _, as := range []string{kube.AsJob, kube.AsJobSet} {
		t.Run(as, func(t *testing.T) {
			ns := c.Namespace(t)
			p := compileFlow(t, rbacFlow())
			data, err := kube.RBAC(p, kube.Options{Namespace: ns, As: as})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("printed:\n%s", data)
			role, cr := parseRBAC(t, data)
			if role.Name != "manifold-kube-rbac" || role.Namespace != ns {
				t.Errorf("Role %s/%s; want %s/manifold-kube-rbac", role.Namespace, role.Name, ns)
			}
			// The rules printed are the rules the preflight asks about.
			needs, namespaces, err := kube.Needs(p, kube.Options{Namespace: ns, As: as})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(namespaces, []string{ns}) {
				t.Errorf("namespaces %v; want [%s]", namespaces, ns)
			}
			var nsNeeds, clusterNeeds []kube.Need
			for _, n := range needs {
				if n.Cluster {
					clusterNeeds = append(clusterNeeds, n)
				} else {
					nsNeeds = append(nsNeeds, n)
				}
			}
			sameRules := func(kind string, rules []rbacv1.PolicyRule, needs []kube.Need) {
				if len(rules) != len(needs) {
					t.Fatalf("%s: %d rules for %d needs", kind, len(rules), len(needs))
				}
				for i, n := range needs {
					if r := rules[i]; !slices.Equal(r.APIGroups, n.Rule.APIGroups) || !slices.Equal(r.Resources, n.Rule.Resources) || !slices.Equal(r.Verbs, n.Rule.Verbs) {
						t.Errorf("%s rule %d: %+v; the preflight asks %+v", kind, i, r, n.Rule)
					}
				}
			}
			sameRules("Role", role.Rules, nsNeeds)
			sameRules("ClusterRole", cr.Rules, clusterNeeds)
			// What the flow creates, and nothing else it does not.
			kinds := map[string]bool{}
			for _, r := range role.Rules {
				if slices.Contains(r.Verbs, "create") {
					kinds[r.Resources[0]] = true
				}
			}
			want := map[string]bool{"jobs": true, "services": true, "pods": true}
			if as == kube.AsJobSet {
				want = map[string]bool{"jobsets": true, "pods": true}
			}
			if !maps.Equal(kinds, want) {
				t.Errorf("creates %v; want %v", kinds, want)
			}

			// A service account bound to exactly that.
			cr.Name += "-" + ns // the shared cluster holds other tests' ClusterRoles
			if _, err := c.Client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
				t.Fatalf("creating the printed Role: %v", err)
			}
			if _, err := c.Client.RbacV1().ClusterRoles().Create(ctx, cr, metav1.CreateOptions{}); err != nil {
				t.Fatalf("creating the printed ClusterRole: %v", err)
			}
			t.Cleanup(func() {
				_ = c.Client.RbacV1().ClusterRoleBindings().Delete(context.Background(), cr.Name, metav1.DeleteOptions{})
				_ = c.Client.RbacV1().ClusterRoles().Delete(context.Background(), cr.Name, metav1.DeleteOptions{})
			})
			if _, err := c.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "runner"}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "runner", Namespace: ns}}
			if _, err := c.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: role.Name}, Subjects: subjects,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
			}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: cr.Name}, Subjects: subjects,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: cr.Name},
			}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			tok, err := c.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "runner", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			o := options(c, ns, t.TempDir())
			o.Kubeconfig, o.As = writeKubeconfig(t, c.Config.Host, c.Config.CAData, tok.Status.Token), as

			// With exactly that, the run succeeds, is refused nothing, and
			// leaves nothing.
			clean := func() {
				t.Helper()
				deadline := time.Now().Add(time.Minute)
				for {
					notes, err := kube.Preflight(ctx, p, o)
					if err == nil && len(notes) == 0 {
						return
					}
					if time.Now().After(deadline) {
						t.Fatalf("with the whole Role and ClusterRole, the preflight says %v, notes %q", err, notes)
					}
					time.Sleep(100 * time.Millisecond)
				}
			}
			clean()
			r := runFlow(t, ctx, p, o)
			if r.err != nil {
				t.Fatalf("run with the printed Role: %v", r.err)
			}
			if r.res.State != record.Succeeded {
				t.Fatalf("run ended %s", r.res.State)
			}
			for _, bad := range []string{"forbidden", "may not", "not checked"} {
				if strings.Contains(r.out.String(), bad) {
					t.Errorf("the run with the printed Role says %q", bad)
				}
			}
			if left := labelled(t, c, ns, r.res.ID); len(left) > 0 {
				t.Errorf("left on the cluster: %v", left)
			}

			// Each verb of each rule taken away in turn.
			checked, verbs := 0, 0
			check := func(n kube.Need, verb, where string, set func([]rbacv1.PolicyRule) error, rules []rbacv1.PolicyRule, i int) {
				t.Helper()
				less := slices.Clone(rules)
				less[i].Verbs = slices.DeleteFunc(slices.Clone(less[i].Verbs), func(v string) bool { return v == verb })
				if len(less[i].Verbs) == 0 {
					less = slices.Delete(less, i, i+1)
				}
				if err := set(less); err != nil {
					t.Fatal(err)
				}
				line := verb + " " + strings.Join(n.Rule.Resources, ",")
				if g := n.Rule.APIGroups[0]; g != "" {
					line += "." + g
				}
				line += " " + where + " (to " + n.Why + ")"
				deadline := time.Now().Add(time.Minute)
				for {
					notes, err := kube.Preflight(ctx, p, o)
					if err != nil || len(notes) > 0 {
						if n.Without == "" {
							var lines []string
							if err != nil {
								lines = strings.Split(err.Error(), "\n")
							}
							if err == nil || len(notes) > 0 || len(lines) != 2 || lines[1] != "  "+line || !strings.Contains(lines[0], "does not let this user do what the run needs") {
								t.Errorf("without %s: error %v, notes %q; want one refusal, %q", line, err, notes, line)
							}
						} else if err != nil || len(notes) != 1 || notes[0] != "this user may not "+line+": "+n.Without {
							t.Errorf("without %s: error %v, notes %q; want one note on it", line, err, notes)
						}
						checked++
						break
					}
					if time.Now().After(deadline) {
						t.Errorf("without %s the preflight says nothing", line)
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
				if err := set(rules); err != nil {
					t.Fatal(err)
				}
				clean()
			}
			setRole := func(rules []rbacv1.PolicyRule) error {
				got, err := c.Client.RbacV1().Roles(ns).Get(ctx, role.Name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				got.Rules = rules
				_, err = c.Client.RbacV1().Roles(ns).Update(ctx, got, metav1.UpdateOptions{})
				return err
			}
			setClusterRole := func(rules []rbacv1.PolicyRule) error {
				got, err := c.Client.RbacV1().ClusterRoles().Get(ctx, cr.Name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				got.Rules = rules
				_, err = c.Client.RbacV1().ClusterRoles().Update(ctx, got, metav1.UpdateOptions{})
				return err
			}
			for i, n := range nsNeeds {
				for _, verb := range n.Rule.Verbs {
					verbs++
					check(n, verb, "in namespace "+ns, setRole, role.Rules, i)
				}
			}
			for i, n := range clusterNeeds {
				for _, verb := range n.Rule.Verbs {
					verbs++
					check(n, verb, "on the cluster", setClusterRole, cr.Rules, i)
				}
			}
			t.Logf("each of the %d verbs taken away: %d told", verbs, checked)

			// check says what the preflight would refuse, as a note.
			i := slices.IndexFunc(nsNeeds, func(n kube.Need) bool { return n.Without == "" && n.Rule.Resources[0] == "events" })
			if i < 0 {
				t.Fatal("no need to list events")
			}
			if err := setRole(slices.Delete(slices.Clone(role.Rules), i, i+1)); err != nil {
				t.Fatal(err)
			}
			note := "run --kube would be refused: this user may not list events in namespace " + ns + " (to " + nsNeeds[i].Why + ")"
			for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
				report, err := kube.Check(ctx, p, o)
				if err != nil {
					t.Fatal(err)
				}
				if slices.Contains(report.Notes, note) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("check's notes %q; want %q", report.Notes, note)
				}
			}
		})
	}
}

// TestRBACLoadsAlike checks that the printed RBAC, whose namespace and flow
// label are values a YAML 1.1 loader reads as a date or a number when plain,
// loads as the same objects in Kubernetes' loader, yaml.v3 and PyYAML.
func TestRBACLoadsAlike(t *testing.T) {
	p := compileFlow(t, rbacFlow())
	files := map[string][]byte{}
	for _, ns := range []string{"2001-12-14", "2001-13-45", "2001-1-1", "1e3", "0777", "on"} {
		data, err := kube.RBAC(p, kube.Options{Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		files[ns+".yaml"] = data
	}
	for name, results := range yamlload.All(t, files) {
		want := results["kubernetes"]
		if want.Err != nil {
			t.Fatalf("%s: Kubernetes refuses it: %v", name, want.Err)
		}
		for _, loader := range yamlload.Loaders[1:] {
			got := results[loader]
			if got.Err != nil {
				t.Errorf("%s: %s refuses it: %v", name, loader, got.Err)
			} else if diff := cmp.Diff(want.Docs, got.Docs); diff != "" {
				t.Errorf("%s: %s reads it otherwise than Kubernetes (-kubernetes +%s):\n%s", name, loader, loader, diff)
			}
		}
	}
}
