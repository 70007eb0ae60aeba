package airflowtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/manifoldflow/manifold/harness/exampletest"
	"github.com/manifoldflow/manifold/harness/proctest"
)

// Credentials of the Server's one user, an admin of the simple auth manager.
const (
	Username = "manifold"
	Password = "manifold-test-password"
)

// ServerStartTimeout bounds the start of a Server: the database migration,
// and the API server until it answers healthy with its scheduler and DAG
// processor.
const ServerStartTimeout = 3 * time.Minute

// ServerOptions say how a Server runs its tasks.
type ServerOptions struct {
	// Kubeconfig and Namespace, when Kubeconfig is set, make the
	// kubernetes_default connection (which the pod operators use) reach that
	// cluster, in that namespace.
	Kubeconfig, Namespace string
	// Policy is an airflow_local_settings.py (cluster policies) for the
	// Airflow home; "" for none. PolicyE2E is the end-to-end tests' own.
	Policy string
	// Env is more environment for the scheduler (and so for its tasks) and
	// the DAG processor, such as the variables Policy reads.
	Env []string
	// Config is more configuration of every component and of the CLI (CLI),
	// as AIRFLOW__SECTION__KEY=value settings.
	Config []string
}

// PolicyE2E returns the path of the end-to-end tests' cluster policies
// (harness/e2e/testdata/airflow/airflow_local_settings.py): the pod operators
// keep their pods and read no logs from kwok's nodes, and the pods of a step
// that MANIFOLD_SIMFAIL_STEP (or the file MANIFOLD_SIMFAIL_STEP_FILE) names
// are labelled for kwok to fail.
func PolicyE2E() string {
	return filepath.Join(exampletest.Root(), "harness", "e2e", "testdata", "airflow", "airflow_local_settings.py")
}

// Server is a real Airflow 3 on loopback: its API server, scheduler (with the
// LocalExecutor, which runs tasks as processes of the scheduler's) and DAG
// processor, over one SQLite database, with the simple auth manager and one
// admin user (Username, Password). The DAG processor reads Dags and lists it
// again every second.
type Server struct {
	// URL is the API server's base URL.
	URL string
	// Home is AIRFLOW_HOME; Dags the dags folder.
	Home, Dags string
	// Started is how long the start took.
	Started time.Duration

	procs []*exec.Cmd
	logs  map[string]string
	// python and env run the CLI, over the components' database.
	python string
	env    []string
}

// StartServer starts a Server for t, and stops it when t ends.
func StartServer(t testing.TB, o ServerOptions) *Server {
	t.Helper()
	python := Python(t)
	began := time.Now()
	home := t.TempDir()
	s := &Server{Home: home, Dags: filepath.Join(home, "dags"), logs: map[string]string{}}
	if err := os.MkdirAll(s.Dags, 0o755); err != nil {
		t.Fatal(err)
	}
	if o.Policy != "" {
		data, err := os.ReadFile(o.Policy)
		if err == nil {
			err = os.MkdirAll(filepath.Join(home, "config"), 0o755)
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(home, "config", "airflow_local_settings.py"), data, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	passwords := filepath.Join(home, "passwords.json")
	pw, _ := json.Marshal(map[string]string{Username: Password})
	if err := os.WriteFile(passwords, pw, 0o600); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	s.URL = "http://127.0.0.1:" + strconv.Itoa(port)
	env := append(os.Environ(),
		"AIRFLOW_HOME="+home,
		"AIRFLOW__CORE__DAGS_FOLDER="+s.Dags,
		"AIRFLOW__CORE__LOAD_EXAMPLES=False",
		"AIRFLOW__CORE__EXECUTOR=LocalExecutor",
		"AIRFLOW__CORE__PARALLELISM=4",
		"AIRFLOW__CORE__AUTH_MANAGER=airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
		"AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS="+Username+":admin",
		"AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE="+passwords,
		"AIRFLOW__API__HOST=127.0.0.1",
		"AIRFLOW__API__PORT="+strconv.Itoa(port),
		"AIRFLOW__API__WORKERS=1",
		"AIRFLOW__CORE__EXECUTION_API_SERVER_URL="+s.URL+"/execution/",
		// The API server signs the tokens tasks present to it; every
		// component must share the key.
		"AIRFLOW__API_AUTH__JWT_SECRET=manifold-test-secret-"+strconv.Itoa(port)+"-"+strconv.FormatInt(began.UnixNano(), 36),
		"AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL=1",
		"AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL=1",
		"AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES=1",
		"AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC=1",
		"AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_SEC=1",
		"AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE=False",
	)
	env = append(env, o.Config...)
	if o.Kubeconfig != "" {
		conn, err := json.Marshal(map[string]any{
			"conn_type": "kubernetes",
			"extra":     map[string]any{"in_cluster": false, "kube_config_path": o.Kubeconfig, "namespace": o.Namespace},
		})
		if err != nil {
			t.Fatal(err)
		}
		env = append(env, "AIRFLOW_CONN_KUBERNETES_DEFAULT="+string(conn))
	}
	s.python, s.env = python, env
	migrate := exec.Command(python, "-m", "airflow", "db", "migrate")
	migrate.Env = env
	if out, err := migrate.CombinedOutput(); err != nil {
		t.Fatalf("airflow db migrate: %v\n%s", err, out)
	}
	t.Cleanup(func() { s.stop(t) })
	for _, c := range []struct {
		name string
		env  []string
	}{{"api-server", env}, {"scheduler", append(env, o.Env...)}, {"dag-processor", append(env, o.Env...)}} {
		log := filepath.Join(home, c.name+".log")
		fh, err := os.Create(log)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(python, "-m", "airflow", c.name)
		cmd.Env, cmd.Stdout, cmd.Stderr = c.env, fh, fh
		// Each component in a process group of its own, which stop ends
		// whole: its workers and task processes with it.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			fh.Close()
			t.Fatalf("airflow %s: %v", c.name, err)
		}
		fh.Close()
		s.procs = append(s.procs, cmd)
		s.logs[c.name] = log
	}
	ctx, cancel := context.WithTimeout(context.Background(), ServerStartTimeout)
	defer cancel()
	if err := s.waitHealthy(ctx); err != nil {
		t.Fatalf("Airflow at %s did not start: %v\n%s", s.URL, err, s.LogTails(30))
	}
	s.Started = time.Since(began)
	t.Logf("Airflow started at %s in %s (home %s)", s.URL, s.Started.Round(100*time.Millisecond), home)
	return s
}

// CLI runs Airflow's own command line (python -m airflow args...) over the
// Server's database and configuration, and returns what it printed; it fails
// t when the command fails.
func (s *Server) CLI(t testing.TB, args ...string) string {
	t.Helper()
	cmd := exec.Command(s.python, append([]string{"-m", "airflow"}, args...)...)
	cmd.Env = s.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("airflow %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// waitHealthy waits until the API server answers that the database, the
// scheduler and the DAG processor are healthy.
func (s *Server) waitHealthy(ctx context.Context) error {
	var last string
	for {
		for _, p := range s.procs {
			if p.ProcessState != nil || !proctest.Alive(p.Process.Pid) {
				return fmt.Errorf("airflow %s exited", strings.Join(p.Args[3:], " "))
			}
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/api/v2/monitor/health", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			var h map[string]struct {
				Status *string `json:"status"`
			}
			err = json.NewDecoder(resp.Body).Decode(&h)
			resp.Body.Close()
			ok := err == nil
			for _, c := range []string{"metadatabase", "scheduler", "dag_processor"} {
				if st := h[c].Status; st == nil || *st != "healthy" {
					ok = false
					last = c + " not healthy yet"
				}
			}
			if ok {
				return nil
			}
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %s", ctx.Err(), last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// LogTails returns the last n lines of each component's log.
func (s *Server) LogTails(n int) string {
	var b strings.Builder
	for _, name := range []string{"api-server", "scheduler", "dag-processor"} {
		data, _ := os.ReadFile(s.logs[name])
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > n {
			lines = lines[len(lines)-n:]
		}
		fmt.Fprintf(&b, "--- airflow %s (%s):\n%s\n", name, s.logs[name], strings.Join(lines, "\n"))
	}
	return b.String()
}

// stop ends the components' process groups: SIGTERM, then SIGKILL to what is
// left after a grace period.
func (s *Server) stop(t testing.TB) {
	if t.Failed() {
		t.Logf("Airflow logs:\n%s", s.LogTails(40))
	}
	for _, p := range s.procs {
		_ = syscall.Kill(-p.Process.Pid, syscall.SIGTERM)
	}
	for _, p := range s.procs {
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-p.Process.Pid, syscall.SIGKILL)
			<-done
		}
		// What the group's leader left behind goes too.
		_ = syscall.Kill(-p.Process.Pid, syscall.SIGKILL)
	}
}

// freePort returns a loopback port no one listens on now.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
