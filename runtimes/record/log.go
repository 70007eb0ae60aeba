package record

import (
	"os"
	"path/filepath"
)

// OpenLog opens log name (StdoutLog or StderrLog) of a step (index -1) or of
// item index of a foreach step in run directory runDir, within the directory:
// no step name, and no link in the directory, reaches a file outside it. A log
// that is not there is an error that wraps fs.ErrNotExist.
func OpenLog(runDir, step string, index int, name string) (*os.File, error) {
	if err := checkTask(step, index); err != nil {
		return nil, err
	}
	r, err := os.OpenRoot(runDir)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.Open(filepath.Join(StateDir("", step, index), name))
}
