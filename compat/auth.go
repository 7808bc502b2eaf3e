package compat

import (
	"fmt"
	"strings"

	"nacos-lockd/settings"
)

// Nacos's auth properties, plus where nacos-lockd keeps its users
// (declared in settings/table.go).
var (
	PropAuthEnabled     = settings.AuthEnabled.Prop
	PropAuthSecretKey   = settings.AuthSecretKey.Prop
	PropAuthTokenExpire = settings.AuthTokenExpire.Prop
	// PropAuthUsersFile is the JSON users file (nacos-lockd); default
	// <data-dir>/users.json.
	PropAuthUsersFile = settings.AuthUsersFile.Prop
	// Nacos's server identity: a header name and value that cluster members
	// send each other. With auth on, a request carrying it may join a node
	// to the cluster.
	PropServerIdentityKey   = settings.ServerIdentityKey.Prop
	PropServerIdentityValue = settings.ServerIdentityValue.Prop

	DefaultAuthTokenExpireSeconds = settings.AuthTokenExpire.DefaultInt()
)

// AuthSettings are the authentication properties.
type AuthSettings struct {
	Enabled       bool
	SecretKey     string
	ExpireSeconds int64
	UsersFile     string // empty: <data-dir>/users.json
}

// Bool returns the boolean value of key ("true"/"false", any case), or def
// when it is absent or empty.
func (p Properties) Bool(key string, def bool) (bool, error) {
	s, ok := p.lookup(key)
	if !ok {
		return def, nil
	}
	switch strings.ToLower(s) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, &PropertyError{Key: key, Value: p[key], Reason: "want true or false"}
}

// AuthSettingsFrom reads the auth properties. Whether the key is strong
// enough is checked where it is used (gateway/auth), so the message can
// say what is wrong with it.
func AuthSettingsFrom(p Properties) (AuthSettings, error) {
	var s AuthSettings
	var err error
	if s.Enabled, err = p.Bool(PropAuthEnabled, settings.AuthEnabled.DefaultBool()); err != nil {
		return s, err
	}
	if s.ExpireSeconds, err = p.Int64(PropAuthTokenExpire, DefaultAuthTokenExpireSeconds); err != nil {
		return s, err
	}
	if reason := settings.AuthTokenExpire.CheckInt(s.ExpireSeconds); reason != "" {
		return s, &PropertyError{Key: PropAuthTokenExpire, Value: p[PropAuthTokenExpire], Reason: reason}
	}
	s.SecretKey = strings.TrimSpace(p[PropAuthSecretKey])
	s.UsersFile = strings.TrimSpace(p[PropAuthUsersFile])
	if s.Enabled && s.SecretKey == "" {
		return s, fmt.Errorf("%s=true needs %s (base64, at least 32 bytes)", PropAuthEnabled, PropAuthSecretKey)
	}
	return s, nil
}
