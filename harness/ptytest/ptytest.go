//go:build linux

// Package ptytest opens pseudo-terminals, so that tests can run a program on a
// terminal and read what it draws there.
package ptytest

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// Open returns a new pseudo-terminal of cols columns and rows lines: the
// controlling side, to read what is written to the terminal, and the terminal
// itself, to give a program as its standard output.
func Open(cols, rows int) (control, tty *os.File, err error) {
	control, err = os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	fd := int(control.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		control.Close()
		return nil, nil, err
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		control.Close()
		return nil, nil, err
	}
	tty, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		control.Close()
		return nil, nil, err
	}
	if err := unix.IoctlSetWinsize(int(tty.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Col: uint16(cols), Row: uint16(rows)}); err != nil {
		control.Close()
		tty.Close()
		return nil, nil, err
	}
	return control, tty, nil
}

// ReadAll reads control until the terminal's last writer has closed it. (Linux
// reports that as EIO.)
func ReadAll(control *os.File) ([]byte, error) {
	var b bytes.Buffer
	_, err := io.Copy(&b, control)
	if errors.Is(err, syscall.EIO) {
		err = nil
	}
	return b.Bytes(), err
}
