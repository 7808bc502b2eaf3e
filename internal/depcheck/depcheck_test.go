package depcheck

import "testing"

// The rule itself: a forbidden prefix catches its packages, an allowed
// path is let through, and the check sees real dependencies (this package
// depends on os/exec, so forbidding "os/" must fail).
func TestRules(t *testing.T) {
	r := Rule{Forbidden: []string{"nacos-lockd/gateway", "github.com/lni/"}, Allowed: []string{"nacos-lockd/gateway/admin/adminapi"}}
	for dep, want := range map[string]bool{
		"nacos-lockd/gateway":                true,
		"nacos-lockd/gateway/auth":           true,
		"nacos-lockd/gateway/admin/adminapi": false,
		"github.com/lni/dragonboat/v4":       true,
		"nacos-lockd/protocol":               false,
	} {
		if got := forbids(r, dep); got != want {
			t.Errorf("%s: forbidden %v, want %v", dep, got, want)
		}
	}
	rec := &recorder{TB: t}
	Check(rec, Rule{Pattern: ".", Forbidden: []string{"os/"}})
	if rec.errors == 0 {
		t.Error("a dependency on os/exec was not reported")
	}
}

type recorder struct {
	testing.TB
	errors int
}

func (r *recorder) Errorf(string, ...any) { r.errors++ }
