package simcluster

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	if os.Getenv(orphanEnv) != "" {
		orphanHelper()
		return
	}
	if os.Getenv(crashEnv) != "" {
		crashHelper()
		return
	}
	os.Exit(Main(m))
}
