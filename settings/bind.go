package settings

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"time"
)

// A struct binds a field to a number setting with a tag naming the
// setting's property (or "--flag"):
//
//	MaxLocks uint64 `setting:"nacos.lock.max_locks"`
//
// The field may be int, int64, uint32, uint64 or float64, holding the
// setting's value in its units, or time.Duration for a Millis or Duration
// setting. Defaults, range checks and copies between two bound structs
// then come from the declaration.

// Field is one struct field bound to a setting.
type Field struct {
	Setting *Setting
	Name    string // the Go field's name
	v       reflect.Value
}

var durationType = reflect.TypeFor[time.Duration]()

// Fields returns the fields of the struct ptr points to that a `setting`
// tag binds, in field order. A tag naming no declared setting, or a field
// whose type does not suit its setting, is a programming error: it panics
// (every bound struct has a test that calls Fields).
func Fields(ptr any) []Field {
	rv := reflect.ValueOf(ptr)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		panic(fmt.Sprintf("settings: Fields wants a pointer to a struct, got %T", ptr))
	}
	rv = rv.Elem()
	var out []Field
	for i := range rv.NumField() {
		sf := rv.Type().Field(i)
		name, ok := sf.Tag.Lookup("setting")
		if !ok {
			continue
		}
		s, ok := Lookup(name)
		if !ok {
			panic(fmt.Sprintf("settings: %s.%s names an undeclared setting %q", rv.Type(), sf.Name, name))
		}
		f := Field{Setting: s, Name: sf.Name, v: rv.Field(i)}
		if err := f.suits(); err != nil {
			panic(fmt.Sprintf("settings: %s.%s: %v", rv.Type(), sf.Name, err))
		}
		out = append(out, f)
	}
	return out
}

func (f Field) suits() error {
	switch f.Setting.Kind {
	case Int, Millis, Duration:
	default:
		return fmt.Errorf("%s is not a number setting", f.Setting.Name())
	}
	if f.v.Type() == durationType {
		if f.Setting.Kind == Int {
			return fmt.Errorf("a time.Duration bound to %s, a count", f.Setting.Name())
		}
		return nil
	}
	if f.Setting.Kind == Duration {
		return fmt.Errorf("%s is a duration: bind a time.Duration", f.Setting.Name())
	}
	switch f.v.Kind() {
	case reflect.Int, reflect.Int64, reflect.Uint32, reflect.Uint64, reflect.Float64:
		return nil
	}
	return fmt.Errorf("type %s cannot hold %s", f.v.Type(), f.Setting.Name())
}

// scale is how many of the field's units make one of the setting's: a
// time.Duration holds nanoseconds, a Millis setting counts milliseconds.
func (f Field) scale() int64 {
	if f.v.Type() == durationType && f.Setting.Kind == Millis {
		return int64(time.Millisecond)
	}
	return 1
}

// Type is the Go field's type.
func (f Field) Type() reflect.Type { return f.v.Type() }

// IsZero reports whether the field is unset.
func (f Field) IsZero() bool { return f.v.IsZero() }

// Int returns the field's value in the setting's units (milliseconds for
// Millis, truncated from a time.Duration; a float64 truncated).
func (f Field) Int() int64 {
	switch f.v.Kind() {
	case reflect.Int, reflect.Int64:
		return f.v.Int() / f.scale()
	case reflect.Uint32, reflect.Uint64:
		return int64(min(f.v.Uint(), math.MaxInt64))
	case reflect.Float64:
		return int64(f.v.Float())
	}
	panic("settings: unreachable")
}

// SetInt sets the field to v, in the setting's units.
func (f Field) SetInt(v int64) {
	switch f.v.Kind() {
	case reflect.Int, reflect.Int64:
		f.v.SetInt(v * f.scale())
	case reflect.Uint32, reflect.Uint64:
		f.v.SetUint(uint64(v))
	case reflect.Float64:
		f.v.SetFloat(float64(v))
	}
}

// SetDefault sets the field to the setting's default.
func (f Field) SetDefault() {
	if f.Setting.Kind == Duration {
		f.v.SetInt(int64(f.Setting.DefaultDuration()))
		return
	}
	f.SetInt(f.Setting.DefaultInt())
}

// Check returns a *RangeError when the field's value is outside the
// setting's range, nil otherwise. It compares in the field's own units, so
// a time.Duration is not rounded to milliseconds first.
func (f Field) Check() error {
	s := f.Setting
	if !s.hasRange() {
		return nil
	}
	var ok bool
	switch f.v.Kind() {
	case reflect.Int, reflect.Int64:
		v, sc := f.v.Int(), f.scale()
		ok = (v == 0 && s.Zero != "") || (v >= s.Min*sc && v <= s.Max*sc)
	case reflect.Uint32, reflect.Uint64:
		v := f.v.Uint()
		ok = (v == 0 && s.Zero != "") || (v <= math.MaxInt64 && s.CheckInt(int64(v)) == "")
	case reflect.Float64:
		v := f.v.Float()
		ok = (v == 0 && s.Zero != "") || (v >= float64(s.Min) && v <= float64(s.Max))
	}
	if ok {
		return nil
	}
	return &RangeError{Setting: s, Field: f.Name, Value: f.text()}
}

func (f Field) text() string {
	switch f.v.Kind() {
	case reflect.Float64:
		return strconv.FormatFloat(f.v.Float(), 'g', -1, 64)
	case reflect.Uint32, reflect.Uint64:
		return strconv.FormatUint(f.v.Uint(), 10)
	}
	if f.v.Type() == durationType {
		return time.Duration(f.v.Int()).String()
	}
	return strconv.FormatInt(f.v.Int(), 10)
}

// RangeError reports a bound field whose value is outside its setting's
// range.
type RangeError struct {
	Setting *Setting
	Field   string // the Go field's name
	Value   string // the field's value as Go prints it
}

func (e *RangeError) Error() string {
	unit := ""
	if e.Setting.Kind == Millis && e.Setting.Between == "" {
		unit = " (ms)"
	}
	return fmt.Sprintf("%s (%s) %s: %s%s", e.Field, e.Setting.Name(), e.Value, e.Setting.Reason(), unit)
}

// FillDefaults sets every bound field of the struct ptr points to that is
// zero to its setting's default.
func FillDefaults(ptr any) {
	for _, f := range Fields(ptr) {
		if f.IsZero() {
			f.SetDefault()
		}
	}
}

// Check checks every bound field of the struct ptr points to against its
// setting's range; the error joins one *RangeError per field out of range.
func Check(ptr any) error {
	var errs []error
	for _, f := range Fields(ptr) {
		if err := f.Check(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Copy sets every bound field of the struct dst points to from the field
// of the struct src points to that is bound to the same setting, converting
// units (milliseconds to a time.Duration, say). Fields src does not bind
// are left as they are.
func Copy(dst, src any) {
	from := map[*Setting]Field{}
	for _, f := range Fields(src) {
		from[f.Setting] = f
	}
	for _, f := range Fields(dst) {
		g, ok := from[f.Setting]
		if !ok {
			continue
		}
		if f.v.Type() == durationType && g.v.Type() == durationType {
			f.v.SetInt(g.v.Int()) // no rounding through milliseconds
			continue
		}
		f.SetInt(g.Int())
	}
}
