// Command tiny is a small main package the tests build for several platforms
// quickly: it prints its name, its architecture and its arguments.
package main

import (
	"fmt"
	"os"
	"runtime"
	"strings"
)

func main() {
	fmt.Printf("tiny %s/%s %s\n", runtime.GOOS, runtime.GOARCH, strings.Join(os.Args[1:], " "))
}
