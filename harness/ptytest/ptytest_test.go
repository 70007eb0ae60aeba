//go:build linux

package ptytest

import (
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/term"
)

// TestTerminal runs a shell on the terminal: it is a terminal of the size asked
// for, and what the shell prints comes back.
func TestTerminal(t *testing.T) {
	control, tty, err := Open(91, 17)
	if err != nil {
		t.Fatal(err)
	}
	defer control.Close()
	if !term.IsTerminal(int(tty.Fd())) {
		t.Fatal("the terminal side is not a terminal")
	}
	w, h, err := term.GetSize(int(tty.Fd()))
	if err != nil || w != 91 || h != 17 {
		t.Fatalf("size %dx%d (%v); want 91x17", w, h, err)
	}
	cmd := exec.Command("sh", "-c", "test -t 1 && echo on a terminal")
	cmd.Stdout, cmd.Stderr = tty, tty
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	out, err := ReadAll(control)
	if werr := cmd.Wait(); werr != nil {
		t.Fatalf("sh: %v", werr)
	}
	if err != nil || !strings.Contains(string(out), "on a terminal") {
		t.Fatalf("read %q (%v); want the shell's line", out, err)
	}
}
