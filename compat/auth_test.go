package compat

import "testing"

func TestAuthSettings(t *testing.T) {
	s, err := AuthSettingsFrom(Properties{})
	if err != nil || s.Enabled || s.ExpireSeconds != 18000 {
		t.Fatalf("defaults: %+v %v", s, err)
	}
	s, err = AuthSettingsFrom(Properties{PropAuthEnabled: "TRUE", PropAuthSecretKey: " a2V5 ", PropAuthTokenExpire: "60", PropAuthUsersFile: "/etc/u.json"})
	if err != nil || !s.Enabled || s.SecretKey != "a2V5" || s.ExpireSeconds != 60 || s.UsersFile != "/etc/u.json" {
		t.Fatalf("set: %+v %v", s, err)
	}
	for _, bad := range []Properties{
		{PropAuthEnabled: "yes"},
		{PropAuthEnabled: "true"},
		{PropAuthTokenExpire: "0"},
		{PropAuthTokenExpire: "soon"},
	} {
		if _, err := AuthSettingsFrom(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
