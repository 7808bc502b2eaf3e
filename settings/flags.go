package settings

import (
	"flag"
	"fmt"
	"time"
)

// Flags are the command-line flags of the declared settings that have
// one, registered on a flag.FlagSet.
type Flags struct {
	fs   *flag.FlagSet
	vals map[*Setting]any // *string, *int, *bool or *time.Duration
}

// RegisterFlags registers on fs the flag of every declared setting that
// has one, with its default and its doc line as usage.
func RegisterFlags(fs *flag.FlagSet) *Flags {
	f := &Flags{fs: fs, vals: map[*Setting]any{}}
	for _, s := range all {
		if s.Flag == "" {
			continue
		}
		switch s.Kind {
		case String:
			def := s.DefaultString()
			if s.FlagUnset {
				def = ""
			}
			f.vals[s] = fs.String(s.Flag, def, s.Doc)
		case Int:
			f.vals[s] = fs.Int(s.Flag, int(s.DefaultInt()), s.Doc)
		case Bool:
			f.vals[s] = fs.Bool(s.Flag, s.DefaultBool(), s.Doc)
		case Duration:
			f.vals[s] = fs.Duration(s.Flag, s.DefaultDuration(), s.Doc)
		default:
			panic(fmt.Sprintf("settings: --%s: no flag for this kind", s.Flag))
		}
	}
	return f
}

func flagValue[T any](f *Flags, s *Setting) T {
	p, ok := f.vals[s].(*T)
	if !ok {
		panic(fmt.Sprintf("settings: %s has no flag of type %T", s.Name(), *new(T)))
	}
	return *p
}

// String is the value of a String setting's flag.
func (f *Flags) String(s *Setting) string { return flagValue[string](f, s) }

// Int is the value of an Int setting's flag.
func (f *Flags) Int(s *Setting) int { return flagValue[int](f, s) }

// Bool is the value of a Bool setting's flag.
func (f *Flags) Bool(s *Setting) bool { return flagValue[bool](f, s) }

// Duration is the value of a Duration setting's flag.
func (f *Flags) Duration(s *Setting) time.Duration { return flagValue[time.Duration](f, s) }

// IsSet reports whether s's flag was given, on the command line or by its
// environment variable (FromEnv).
func (f *Flags) IsSet(s *Setting) bool {
	set := false
	f.fs.Visit(func(fl *flag.Flag) { set = set || fl.Name == s.Flag })
	return set
}

// FromEnv sets every flag that the command line left unset, and that has
// an environment variable, from that variable when it is not empty: flags
// win over the environment. The error names the variable and its value.
func (f *Flags) FromEnv(getenv func(string) string) error {
	given := map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	for _, s := range all {
		if s.Env == "" || given[s.Flag] {
			continue
		}
		if v := getenv(s.Env); v != "" {
			if err := f.fs.Set(s.Flag, v); err != nil {
				return fmt.Errorf("%s=%q: %w", s.Env, v, err)
			}
		}
	}
	return nil
}

// EnvOf is the environment variable of the flag named name, or "".
func EnvOf(name string) string {
	if s, ok := Lookup("--" + name); ok {
		return s.Env
	}
	return ""
}
