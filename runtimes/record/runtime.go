package record

// Runtime names what ran a run, as run.json records it.
type Runtime string

// The runtimes. Local is empty, so that run.json leaves it out for a run on
// this machine, as it always has.
const (
	// Local is this machine (run without --kube).
	Local Runtime = ""
	// Kube is a Kubernetes cluster the runner drove itself (run --kube).
	Kube Runtime = "kube"
	// Argo is Argo Workflows on a cluster.
	Argo Runtime = "argo"
	// Airflow is an Airflow deployment.
	Airflow Runtime = "airflow"
)

// runtimes are the values of Record.Runtime.
var runtimes = []Runtime{Local, Kube, Argo, Airflow}

// Name is how r reads where a run is shown: "local" for Local, its value for
// the others.
func (r Runtime) Name() string {
	if r == Local {
		return "local"
	}
	return string(r)
}
