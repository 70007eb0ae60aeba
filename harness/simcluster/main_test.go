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
	os.Exit(Main(m))
}
