package atomicfile

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestWriteReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	for _, write := range []func(string, []byte) error{Write, WriteSync} {
		for _, data := range []string{"first\n", "second, longer\n", "3\n"} {
			if err := write(path, []byte(data)); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != data {
				t.Errorf("read %q after writing %q", got, data)
			}
		}
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", info.Mode().Perm())
	}
	if names := list(t, dir); !slices.Equal(names, []string{"state.json"}) {
		t.Errorf("directory holds %q, want only state.json", names)
	}
}

func TestWriteMissingDirectory(t *testing.T) {
	if err := Write(filepath.Join(t.TempDir(), "no", "such", "f"), nil); err == nil {
		t.Error("Write into a missing directory succeeded")
	}
}

// TestRemoveTemps leaves what a killed writer leaves (its temporary file, made the
// way Write makes it) beside finished files, and checks only the former goes.
func TestRemoveTemps(t *testing.T) {
	dir := t.TempDir()
	if err := Write(filepath.Join(dir, "model.json"), []byte("{}")); err != nil {
		t.Fatal(err)
	}
	tmp, err := os.CreateTemp(dir, ".model.json.*"+tempSuffix)
	if err != nil {
		t.Fatal(err)
	}
	tmp.Close()
	for _, keep := range []string{".hidden", "data.tmp", ".cache.tmp.d"} {
		if err := os.WriteFile(filepath.Join(dir, keep), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if !IsTemp(filepath.Base(tmp.Name())) {
		t.Fatalf("IsTemp(%q) = false", filepath.Base(tmp.Name()))
	}
	n, err := RemoveTemps(dir)
	if err != nil || n != 1 {
		t.Fatalf("RemoveTemps = %d, %v; want 1, nil", n, err)
	}
	want := []string{".cache.tmp.d", ".hidden", "data.tmp", "model.json"}
	if names := list(t, dir); !slices.Equal(names, want) {
		t.Errorf("after RemoveTemps: %q, want %q", names, want)
	}
	if n, err := RemoveTemps(filepath.Join(dir, "missing")); n != 0 || err != nil {
		t.Errorf("RemoveTemps of a missing directory = %d, %v", n, err)
	}
}

func list(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestBatchIsAllOrNothing: when one file of a batch cannot be written, no file
// is replaced and no temporary file is left; when all can, all are.
func TestBatchIsAllOrNothing(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	if err := os.WriteFile(a, []byte("old a"), 0o644); err != nil {
		t.Fatal(err)
	}
	var batch Batch
	for path, data := range map[string]string{a: "new a", b: "new b"} {
		if err := add(&batch, path, data); err != nil {
			t.Fatal(err)
		}
	}
	if err := add(&batch, filepath.Join(dir, "missing", "c.yaml"), "c"); err == nil {
		t.Fatal("Create into a missing directory succeeded")
	}
	batch.Abort()
	if got, _ := os.ReadFile(a); string(got) != "old a" {
		t.Errorf("a = %q after an aborted batch, want the old content", got)
	}
	if _, err := os.Stat(b); !os.IsNotExist(err) {
		t.Errorf("b exists after an aborted batch: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if IsTemp(e.Name()) {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}

	batch = Batch{}
	for path, data := range map[string]string{a: "new a", b: "new b"} {
		if err := add(&batch, path, data); err != nil {
			t.Fatal(err)
		}
	}
	if err := batch.Commit(); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{a: "new a", b: "new b"} {
		if got, _ := os.ReadFile(path); string(got) != want {
			t.Errorf("%s = %q, want %q", path, got, want)
		}
	}
}

// TestBatchJoin: a joined batch's files follow the receiver's, a path both have
// takes the joined one's data (its older temporary file removed), and the joined
// batch is left empty.
func TestBatchJoin(t *testing.T) {
	dir := t.TempDir()
	a, b, shared := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "shared")
	var first, second Batch
	for _, f := range []struct {
		batch      *Batch
		path, data string
	}{{&first, a, "a"}, {&first, shared, "first"}, {&second, shared, "second"}, {&second, b, "b"}} {
		if err := add(f.batch, f.path, f.data); err != nil {
			t.Fatal(err)
		}
	}
	first.Join(&second)
	if got, want := first.Paths(), []string{a, shared, b}; !slices.Equal(got, want) {
		t.Errorf("paths after Join = %v, want %v", got, want)
	}
	if len(second.Paths()) != 0 {
		t.Errorf("the joined batch still holds %v", second.Paths())
	}
	entries, _ := os.ReadDir(dir)
	if temps := len(entries); temps != 3 {
		t.Errorf("%d temporary files before Commit, want 3 (the replaced one removed)", temps)
	}
	if err := first.Commit(); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{a: "a", b: "b", shared: "second"} {
		if got, _ := os.ReadFile(path); string(got) != want {
			t.Errorf("%s = %q, want %q", filepath.Base(path), got, want)
		}
	}
}

// add writes data to the temporary file Create gives for path.
func add(b *Batch, path, data string) error {
	f, err := b.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// TestRemoveStale: only the old temporary files of the path named go, even when
// its name holds characters that a glob pattern reads.
func TestRemoveStale(t *testing.T) {
	dir := t.TempDir()
	old := time.Now().Add(-time.Hour)
	for name, mtime := range map[string]time.Time{
		".a[1]*.yaml.5.tmp": old,        // the path's, old: removed
		".a[1]*.yaml.6.tmp": time.Now(), // the path's, new: kept
		".a1x.yaml.5.tmp":   old,        // what the unquoted pattern would match
		"a[1]*.yaml":        old,
	} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := RemoveStale(filepath.Join(dir, "a[1]*.yaml"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{filepath.Join(dir, ".a[1]*.yaml.5.tmp")}; !slices.Equal(removed, want) {
		t.Errorf("removed %v, want %v", removed, want)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 {
		t.Errorf("%d files left, want 3: %v", len(entries), entries)
	}
}

// TestBatchCommitFailingLastRenameChangesNothing: when the last rename of a
// Commit fails, every file is as it was before it: those replaced hold their
// old content (the very file, mode and all), those new are gone, and so is
// every temporary file; whether the files were kept as hard links or, on a
// file system without them, renamed.
func TestBatchCommitFailingLastRenameChangesNothing(t *testing.T) {
	for _, links := range []bool{true, false} {
		if !links {
			link = func(string, string) error { return &os.LinkError{Op: "link", Err: os.ErrPermission} }
		}
		commitFailingLastRename(t)
		link = os.Link
	}
}

func commitFailingLastRename(t *testing.T) {
	dir := t.TempDir()
	a, b, c := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml"), filepath.Join(dir, "c.py")
	for path, data := range map[string]string{a: "old a", c: "old c"} {
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	before := map[string]os.FileInfo{}
	for _, path := range []string{a, c} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		before[path] = fi
	}
	var batch Batch
	for _, f := range []struct{ path, data string }{{a, "new a"}, {b, "new b"}, {c, "new c"}} {
		if err := add(&batch, f.path, f.data); err != nil {
			t.Fatal(err)
		}
	}
	renames := 0
	rename = func(from, to string) error {
		if to == c {
			return &os.LinkError{Op: "rename", Old: from, New: to, Err: os.ErrPermission}
		}
		renames++
		return os.Rename(from, to)
	}
	defer func() { rename = os.Rename }()
	if err := batch.Commit(); err == nil {
		t.Fatal("Commit succeeded though its last rename failed")
	}
	if renames < 2 {
		t.Fatalf("%d renames before the failing one, want the first two files renamed first", renames)
	}
	for path, want := range map[string]string{a: "old a", c: "old c"} {
		got, err := os.ReadFile(path)
		if err != nil || string(got) != want {
			t.Errorf("%s = %q (%v) after a failed Commit, want %q", filepath.Base(path), got, err, want)
		}
		if fi, err := os.Stat(path); err != nil || !os.SameFile(fi, before[path]) || fi.Mode() != before[path].Mode() {
			t.Errorf("%s is not the file it was before the Commit", filepath.Base(path))
		}
	}
	if _, err := os.Stat(b); !os.IsNotExist(err) {
		t.Errorf("b.yaml, new, exists after a failed Commit: %v", err)
	}
	if names := list(t, dir); !slices.Equal(names, []string{"a.yaml", "c.py"}) {
		t.Errorf("directory holds %q after a failed Commit, want only a.yaml and c.py", names)
	}
}
