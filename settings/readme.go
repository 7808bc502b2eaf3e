package settings

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The README's Configuration table sits between these two lines.
const (
	TableBegin = "<!-- settings table: generated from settings/table.go by `make settings-readme`, do not edit -->"
	TableEnd   = "<!-- end of settings table -->"
)

// Table renders every declared setting as the README's Markdown table.
func Table() string {
	var b strings.Builder
	b.WriteString("| Property | Flag, environment | Default | Allowed | Meaning |\n")
	b.WriteString("| --- | --- | --- | --- | --- |\n")
	for _, s := range all {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n",
			cell(s.propCell()), cell(s.flagCell()), cell(s.defaultCell()), cell(s.allowedCell()), cell(s.Doc))
	}
	return b.String()
}

// ReplaceTable returns readme with the text between TableBegin and
// TableEnd replaced by Table.
func ReplaceTable(readme []byte) ([]byte, error) {
	begin := bytes.Index(readme, []byte(TableBegin+"\n"))
	end := bytes.Index(readme, []byte(TableEnd))
	if begin < 0 || end < begin {
		return nil, errors.New("README: no settings table markers (" + TableBegin + " ... " + TableEnd + ")")
	}
	var out bytes.Buffer
	out.Write(readme[:begin+len(TableBegin)+1])
	out.WriteString(Table())
	out.Write(readme[end:])
	return out.Bytes(), nil
}

func cell(s string) string {
	if s == "" {
		return " "
	}
	return strings.ReplaceAll(s, "|", `\|`)
}

func (s *Setting) propCell() string {
	if s.Prop == "" {
		return ""
	}
	c := "`" + s.Prop + "`"
	if s.Alias != "" {
		c += " / `" + s.Alias + "`"
	}
	if s.Nacos {
		c += " (Nacos)"
	}
	return c
}

func (s *Setting) flagCell() string {
	if s.Flag == "" {
		return ""
	}
	c := "`--" + s.Flag + "`"
	if s.Env != "" {
		c += " `" + s.Env + "`"
	}
	return c
}

func (s *Setting) defaultCell() string {
	if s.DefaultText != "" {
		return s.DefaultText
	}
	switch s.Kind {
	case Int, Millis:
		return s.formatInt(s.DefaultInt())
	case Duration:
		return s.DefaultDuration().String()
	case Bool:
		return strconv.FormatBool(s.DefaultBool())
	}
	if v := s.DefaultString(); v != "" {
		return "`" + v + "`"
	}
	return ""
}

func (s *Setting) allowedCell() string {
	switch {
	case s.Kind == Bool:
		return "true or false"
	case len(s.Choices) > 0:
		return s.ChoiceList()
	case !s.hasRange():
		return ""
	}
	r := s.rangeText()
	if s.Between != "" {
		r = "between " + s.Between
	}
	if s.Zero != "" && s.Min > 0 {
		return "0 (" + s.Zero + "), " + r
	}
	if s.Zero != "" && s.Kind == Duration {
		return time.Duration(0).String() + " (" + s.Zero + ") to " + s.formatInt(s.Max)
	}
	return r
}

// rangeText is Min to Max with the unit said once: "1 to 60000 bytes",
// "1 ms to 100 years".
func (s *Setting) rangeText() string {
	lo, hi := s.formatInt(s.Min), s.formatInt(s.Max)
	if s.Kind == Duration || (s.Kind == Millis && s.Max == MaxMillis) {
		return lo + " to " + hi
	}
	return strconv.FormatInt(s.Min, 10) + " to " + hi
}
