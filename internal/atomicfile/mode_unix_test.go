//go:build unix

package atomicfile

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// umask sets the process's umask for the rest of the test.
func umask(t *testing.T, mask int) {
	t.Helper()
	old := syscall.Umask(mask)
	t.Cleanup(func() { syscall.Umask(old) })
}

// writers are every way the package writes a file.
var writers = map[string]func(path, data string) error{
	"Write":     func(path, data string) error { return Write(path, []byte(data)) },
	"WriteSync": func(path, data string) error { return WriteSync(path, []byte(data)) },
	"Batch": func(path, data string) error {
		var b Batch
		if err := add(&b, path, data); err != nil {
			return err
		}
		return b.Commit()
	},
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// TestNewFileMode: a new file gets the mode os.Create gives it, 0666 less the
// umask, as every writer makes it.
func TestNewFileMode(t *testing.T) {
	for _, tt := range []struct {
		umask int
		want  os.FileMode
	}{{0o027, 0o640}, {0o077, 0o600}, {0o022, 0o644}} {
		umask(t, tt.umask)
		for name, write := range writers {
			path := filepath.Join(t.TempDir(), "f")
			if err := write(path, "x"); err != nil {
				t.Fatal(err)
			}
			if got := mode(t, path); got != tt.want {
				t.Errorf("%s under umask %03o: mode %03o, want %03o", name, tt.umask, got, tt.want)
			}
		}
	}
}

// TestReplaceKeepsMode: a file replaced keeps its mode, whatever the umask.
func TestReplaceKeepsMode(t *testing.T) {
	umask(t, 0o022)
	for _, keep := range []os.FileMode{0o600, 0o640, 0o755} {
		for name, write := range writers {
			path := filepath.Join(t.TempDir(), "f")
			if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, keep); err != nil {
				t.Fatal(err)
			}
			if err := write(path, "new"); err != nil {
				t.Fatal(err)
			}
			if got := mode(t, path); got != keep {
				t.Errorf("%s over a file of mode %03o: mode %03o, want it kept", name, keep, got)
			}
			if data, _ := os.ReadFile(path); string(data) != "new" {
				t.Errorf("%s: the file holds %q, want the new data", name, data)
			}
		}
	}
}
