package compat

import (
	"strings"
	"testing"

	"nacos-lockd/settings"
)

// Every number property of the lock service that is declared is read into
// LockSettings, and DefaultLockSettings is the declarations' defaults.
func TestLockSettingsCoverDeclarations(t *testing.T) {
	var s LockSettings
	bound := map[*settings.Setting]bool{}
	for _, f := range settings.Fields(&s) {
		bound[f.Setting] = true
	}
	for _, d := range settings.All() {
		number := d.Kind == settings.Int || d.Kind == settings.Millis
		if number && strings.HasPrefix(d.Prop, "nacos.lock.") && !bound[d] {
			t.Errorf("%s is declared but LockSettings has no field for it", d.Prop)
		}
	}
	def := DefaultLockSettings()
	for _, f := range settings.Fields(&def) {
		if f.Int() != f.Setting.DefaultInt() {
			t.Errorf("%s: default %d, declared %d", f.Setting.Prop, f.Int(), f.Setting.DefaultInt())
		}
	}
}
