package kind

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	kindexec "sigs.k8s.io/kind/pkg/exec"
	"sigs.k8s.io/kind/pkg/log"
)

// logger writes kind's progress messages (level 0) and warnings to w, a line
// each; kind's debug levels are dropped.
type logger struct {
	mu sync.Mutex
	w  io.Writer
}

var _ log.Logger = (*logger)(nil)

func newLogger(w io.Writer) *logger {
	if w == nil {
		w = io.Discard
	}
	return &logger{w: w}
}

func (l *logger) line(prefix, msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range strings.Split(strings.TrimRight(msg, "\n"), "\n") {
		fmt.Fprintf(l.w, "%s%s\n", prefix, s)
	}
}

func (l *logger) Warn(msg string)                   { l.line("warning: ", msg) }
func (l *logger) Warnf(format string, args ...any)  { l.Warn(fmt.Sprintf(format, args...)) }
func (l *logger) Error(msg string)                  { l.line("error: ", msg) }
func (l *logger) Errorf(format string, args ...any) { l.Error(fmt.Sprintf(format, args...)) }

func (l *logger) V(level log.Level) log.InfoLogger {
	if level > 0 {
		return log.NoopInfoLogger{}
	}
	return info{l}
}

// printf writes one message of Manifold's own.
func (l *logger) printf(format string, args ...any) { l.line("", fmt.Sprintf(format, args...)) }

// info is the logger at level 0.
type info struct{ l *logger }

func (i info) Info(msg string)                  { i.l.line("", msg) }
func (i info) Infof(format string, args ...any) { i.Info(fmt.Sprintf(format, args...)) }
func (i info) Enabled() bool                    { return true }

// engineErr says what failed: what, then, when err comes from a command of the
// container engine that kind ran, that command and the last line it wrote (the
// engine's own message, such as "Cannot connect to the Docker daemon … Is the
// docker daemon running?"), else err.
func engineErr(what string, err error) error {
	var run *kindexec.RunError
	if errors.As(err, &run) || errors.As(kindexec.RunErrorForError(err), &run) {
		out := strings.TrimSpace(string(run.Output))
		if i := strings.LastIndexByte(out, '\n'); i >= 0 {
			out = strings.TrimSpace(out[i+1:])
		}
		if out != "" && len(run.Command) > 0 {
			cmd := run.Command[:min(2, len(run.Command))]
			return fmt.Errorf("%s: %s failed: %s", what, strings.Join(cmd, " "), out)
		}
	}
	return fmt.Errorf("%s: %w", what, err)
}
