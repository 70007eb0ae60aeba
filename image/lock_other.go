//go:build !unix

package image

// Without file locks, two builds of one package at once may both link it, and
// one may read the program while the other writes it.

func lockFile(string) (func(), error) { return func() {}, nil }
