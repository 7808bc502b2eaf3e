// Package chaos is the fault-injection suite: it runs a cluster of real
// nacos-lockd processes, clients that speak the real protocol, and a
// nemesis that kills, pauses, partitions, skews clocks and slows disks,
// then checks every recorded history with porcupine against a model of
// our lock semantics (model_test.go), plus fencing-token, fenced-register
// and replica-state checks. See README.md in this folder.
//
// The cluster runs are behind the chaos build tag (make chaos-ci, make
// chaos); the model's own tests run with every go test.
package chaos

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	// The harness starts client processes by re-running this binary.
	if cfg := os.Getenv(clientEnv); cfg != "" {
		os.Exit(runClientProcess(cfg))
	}
	os.Exit(m.Run())
}
