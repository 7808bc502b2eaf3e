// Package settings declares every setting of nacos-lockd once: its Nacos
// property name, its command-line flag and environment variable if any,
// its default, its allowed range and a line of documentation (table.go).
// Everything else derives from that declaration: compat reads and checks
// the properties with it, cmd registers the flags and their environment
// variables from it, gateway takes its defaults and its checks from it
// (through `setting:"..."` struct tags, bind.go), and the README's
// Configuration table is rendered from it (readme.go; a test keeps the
// README in step).
//
// The package imports nothing of ours, so every other package may use it.
package settings

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Kind is what a setting's value is.
type Kind uint8

const (
	// Int is a whole number (a count, a size, a port): Default is int64.
	Int Kind = iota + 1
	// Millis is a duration written in milliseconds, as Nacos writes them:
	// Default, Min and Max are int64 milliseconds. A time.Duration field
	// bound to it holds the same duration.
	Millis
	// Duration is a Go duration ("5ms"), for flags: Default is a
	// time.Duration, Min and Max are nanoseconds.
	Duration
	// Bool is true or false: Default is bool.
	Bool
	// String is text: Default is string.
	String
)

// Setting is one setting's declaration. Declarations are made once, in
// table.go, and never changed.
type Setting struct {
	// Prop is the name in application.properties; "" when only a flag sets
	// it.
	Prop string
	// Alias is an older property name, read when Prop is absent or empty
	// (Nacos 2.x's server.port).
	Alias string
	// Flag is the command-line flag, without dashes; "" when there is none.
	Flag string
	// Env is the environment variable that stands in for Flag when the
	// flag is not given.
	Env string
	// FlagUnset registers Flag with an empty default: only a value given
	// counts, and what it would default to is decided elsewhere (the
	// property, then discovery among cluster.conf's members).
	FlagUnset bool

	Kind    Kind
	Default any // int64 for Int and Millis, time.Duration, bool or string
	// DefaultText is the README's default where Default alone would
	// mislead (a default that depends on the mode).
	DefaultText string

	// Min and Max bound an Int, Millis or Duration setting, both included.
	// Both zero: no range.
	Min, Max int64
	// Zero, when not empty, allows 0 as well, outside Min..Max, and says
	// what it means.
	Zero string
	// Between is the range as messages say it ("1 second and 10 years")
	// where the plain numbers would read badly.
	Between string
	// Choices are a String setting's allowed values, in the order messages
	// list them.
	Choices []string
	// Unit follows an Int setting's values in the README ("bytes").
	Unit string

	// Nacos marks Nacos's (or Spring Boot's) own property; the others are
	// nacos-lockd's, named in the same style.
	Nacos bool
	// Doc is the one line that documents the setting: the flag's usage and
	// the README's meaning.
	Doc string
}

// Name is what messages call the setting: its property, else --flag.
func (s *Setting) Name() string {
	if s.Prop != "" {
		return s.Prop
	}
	return "--" + s.Flag
}

// DefaultInt is the default of an Int or Millis setting (milliseconds).
func (s *Setting) DefaultInt() int64 {
	v, ok := s.Default.(int64)
	if !ok || (s.Kind != Int && s.Kind != Millis) {
		panic(fmt.Sprintf("settings: %s is not a number setting", s.Name()))
	}
	return v
}

// DefaultDuration is the default of a Millis or Duration setting.
func (s *Setting) DefaultDuration() time.Duration {
	switch s.Kind {
	case Millis:
		return time.Duration(s.DefaultInt()) * time.Millisecond
	case Duration:
		return s.Default.(time.Duration)
	}
	panic(fmt.Sprintf("settings: %s is not a duration setting", s.Name()))
}

// DefaultString is the default of a String setting.
func (s *Setting) DefaultString() string {
	v, ok := s.Default.(string)
	if !ok {
		panic(fmt.Sprintf("settings: %s is not a string setting", s.Name()))
	}
	return v
}

// DefaultBool is the default of a Bool setting.
func (s *Setting) DefaultBool() bool {
	v, ok := s.Default.(bool)
	if !ok {
		panic(fmt.Sprintf("settings: %s is not a bool setting", s.Name()))
	}
	return v
}

// hasRange reports whether Min..Max bound the setting.
func (s *Setting) hasRange() bool { return s.Min != 0 || s.Max != 0 }

// CheckInt checks v (an Int's value, a Millis's milliseconds or a
// Duration's nanoseconds) against the range, and returns the reason it is
// refused ("must be between 1 and 60000"), or "" when it is allowed.
func (s *Setting) CheckInt(v int64) string {
	if !s.hasRange() || (v == 0 && s.Zero != "") || (v >= s.Min && v <= s.Max) {
		return ""
	}
	return s.Reason()
}

// Reason is what a message says about a value out of range.
func (s *Setting) Reason() string {
	if s.Between != "" {
		return "must be between " + s.Between
	}
	return fmt.Sprintf("must be between %d and %d", s.Min, s.Max)
}

// CheckChoice reports whether v is one of Choices (any when there are
// none).
func (s *Setting) CheckChoice(v string) bool {
	if len(s.Choices) == 0 {
		return true
	}
	for _, c := range s.Choices {
		if v == c {
			return true
		}
	}
	return false
}

// ChoiceList lists Choices as a message does: "none, want or need".
func (s *Setting) ChoiceList() string {
	switch n := len(s.Choices); n {
	case 0:
		return ""
	case 1:
		return s.Choices[0]
	default:
		return strings.Join(s.Choices[:n-1], ", ") + " or " + s.Choices[n-1]
	}
}

// check reports what is wrong with the declaration itself.
func (s *Setting) check() error {
	if s.Prop == "" && s.Flag == "" {
		return errors.New("neither a property nor a flag")
	}
	if s.Env != "" && s.Flag == "" {
		return errors.New("an environment variable without a flag")
	}
	if s.Doc == "" {
		return errors.New("no doc line")
	}
	var ok bool
	switch s.Kind {
	case Int, Millis:
		var v int64
		v, ok = s.Default.(int64)
		if ok && s.hasRange() && s.CheckInt(v) != "" {
			return fmt.Errorf("default %d outside its range", v)
		}
	case Duration:
		var v time.Duration
		v, ok = s.Default.(time.Duration)
		if ok && s.hasRange() && s.CheckInt(int64(v)) != "" {
			return fmt.Errorf("default %s outside its range", v)
		}
	case Bool:
		_, ok = s.Default.(bool)
	case String:
		var v string
		v, ok = s.Default.(string)
		if ok && v != "" && !s.CheckChoice(v) {
			return fmt.Errorf("default %q not among its choices", v)
		}
	default:
		return errors.New("no kind")
	}
	if !ok {
		return fmt.Errorf("default %#v does not suit its kind", s.Default)
	}
	if s.Min > s.Max {
		return errors.New("min above max")
	}
	return nil
}

var (
	all    []*Setting
	byName = map[string]*Setting{}
)

// declare adds a setting to the table, in README order.
func declare(s Setting) *Setting {
	if err := s.check(); err != nil {
		panic(fmt.Sprintf("settings: %s: %v", s.Name(), err))
	}
	p := &s
	for _, name := range []string{s.Prop, s.Alias, "--" + s.Flag} {
		if name == "" || name == "--" {
			continue
		}
		if _, dup := byName[name]; dup {
			panic("settings: " + name + " declared twice")
		}
		byName[name] = p
	}
	all = append(all, p)
	return p
}

// All returns every declared setting, in the README's order.
func All() []*Setting { return append([]*Setting(nil), all...) }

// Lookup finds a setting by property name (or alias), or by "--flag".
func Lookup(name string) (*Setting, bool) {
	s, ok := byName[name]
	return s, ok
}

// formatInt writes v in a setting's units, for the README.
func (s *Setting) formatInt(v int64) string {
	switch s.Kind {
	case Millis:
		if v == MaxMillis {
			return "100 years"
		}
		return strconv.FormatInt(v, 10) + " ms"
	case Duration:
		return time.Duration(v).String()
	}
	if s.Unit != "" {
		return strconv.FormatInt(v, 10) + " " + s.Unit
	}
	return strconv.FormatInt(v, 10)
}
