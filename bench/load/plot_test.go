package load

import (
	"image/png"
	"math"
	"os"
	"path/filepath"
	"testing"
)

func TestPlotReportsWritesPNG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "chart.png")
	reps := []Report{
		{Target: "a", Workload: "w1", Clients: 1, Timeline: []Sample{{T: 1, OpsPerSec: 100, P50Ms: 1, P99Ms: 2}, {T: 2, OpsPerSec: 120, P50Ms: 1.1, P99Ms: 3}}},
		{Target: "b", Workload: "w1", Clients: 1, Timeline: []Sample{{T: 1, OpsPerSec: 0, P50Ms: math.NaN(), P99Ms: math.NaN()}}},
		{Target: "c", Workload: "w1", Clients: 1}, // no samples at all
	}
	if err := PlotReports(path, reps); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 900 || b.Dy() < 600 {
		t.Fatalf("chart is %v", b)
	}
}
