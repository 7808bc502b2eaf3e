package compat

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseProperties(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Properties
	}{
		{"empty input", "", Properties{}},
		{"blank lines only", "\n  \n\t\f\n\r\n", Properties{}},
		{"equals", "a=b", Properties{"a": "b"}},
		{"equals with spaces", "a = b", Properties{"a": "b"}},
		{"colon", "a:b", Properties{"a": "b"}},
		{"space", "a b", Properties{"a": "b"}},
		{"tab", "a\tb", Properties{"a": "b"}},
		{"form feed", "a\fb", Properties{"a": "b"}},
		{"spaces around separator", "a  :  b", Properties{"a": "b"}},
		{"trailing whitespace kept", "a = b  \t", Properties{"a": "b  \t"}},
		{"leading whitespace ignored", " \t\fa=b", Properties{"a": "b"}},
		{"key only", "a", Properties{"a": ""}},
		{"empty value", "a=", Properties{"a": ""}},
		{"empty value after spaces", "a =  ", Properties{"a": ""}},
		{"empty key", "=b", Properties{"": "b"}},
		{"empty key colon", ":b", Properties{"": "b"}},
		{"second equals is value", "a==b", Properties{"a": "=b"}},
		{"one separator after whitespace", "a = = b", Properties{"a": "= b"}},
		{"colon then equals", "a:=b", Properties{"a": "=b"}},
		{"space separator then equals", "a b=c", Properties{"a": "b=c"}},
		{"escaped equals in key", `a\=b=c`, Properties{"a=b": "c"}},
		{"escaped colon in key", `a\:b:c`, Properties{"a:b": "c"}},
		{"escaped space in key", `a\ b=c`, Properties{"a b": "c"}},
		{"escaped leading space in value", `a=\ b`, Properties{"a": " b"}},
		{"hash comment", "# c\na=b", Properties{"a": "b"}},
		{"bang comment", "! c\na=b", Properties{"a": "b"}},
		{"indented comment", "   # c\n\t! d\na=b", Properties{"a": "b"}},
		{"hash inside value", "a=b # not a comment", Properties{"a": "b # not a comment"}},
		{"hash key", `\#a=b`, Properties{"#a": "b"}},
		{"comment does not continue", "# c \\\na=b", Properties{"a": "b"}},
		{"continuation", "a=b\\\n   c", Properties{"a": "bc"}},
		{"continuation keeps inner spaces", "a=b \\\n   c", Properties{"a": "b c"}},
		{"continuation in key", "ke\\\n  y=v", Properties{"key": "v"}},
		{"continuation before separator", "key\\\n  =v", Properties{"key": "v"}},
		{"two continuations", "a=1\\\n 2\\\n 3", Properties{"a": "123"}},
		{"continued line starting with hash", "a=b\\\n# c", Properties{"a": "b# c"}},
		{"even backslashes do not continue", "a=b\\\\\nc=d", Properties{"a": `b\`, "c": "d"}},
		{"odd backslashes continue", "a=b\\\\\\\n c", Properties{"a": `b\c`}},
		{"continuation into blank line ends", "a=b\\\n\nc=d", Properties{"a": "b", "c": "d"}},
		{"continuation into whitespace line ends", "a=b\\\n   \nc=d", Properties{"a": "b", "c": "d"}},
		{"trailing lone backslash at EOF", `a=b\`, Properties{"a": "b"}},
		{"trailing backslash then newline at EOF", "a=b\\\n", Properties{"a": "b"}},
		{"trailing double backslash at EOF", `a=b\\`, Properties{"a": `b\`}},
		// JDK 9+ edge cases: what Java makes of a lone backslash line.
		{"lone backslash at EOF", `\`, Properties{"": ""}},
		{"lone backslash line then EOF", "\\\n", Properties{"": ""}},
		{"lone backslash into blank line", "\\\n\na=b", Properties{"a": "b"}},
		{"lone backslash then comment", "\\\n#a=b", Properties{}},
		{"escapes", `a=\t\n\r\f\\\q\"\'`, Properties{"a": "\t\n\r\f\\q\"'"}},
		{"unicode escapes", `a=\u0041\u00e9\u4E2D`, Properties{"a": "Aé中"}},
		{"unicode escape in key", `a\u0020b=c`, Properties{"a b": "c"}},
		{"escaped surrogate pair", `a=\uD83D\uDE00`, Properties{"a": "😀"}},
		{"lone high surrogate", `a=\uD83Dx`, Properties{"a": "\uFFFDx"}},
		{"lone low surrogate", `a=\uDE00`, Properties{"a": "\uFFFD"}},
		{"escaped separator chars in value", `a=x\=y\:z`, Properties{"a": "x=y:z"}},
		{"raw UTF-8", "键=值 ✓", Properties{"键": "值 ✓"}},
		{"invalid UTF-8", "a=\xff\xfe", Properties{"a": "\uFFFD\uFFFD"}},
		{"other unicode spaces are not separators", "a\u00a0b=c", Properties{"a\u00a0b": "c"}},
		{"vertical tab is not whitespace", "\va=b", Properties{"\va": "b"}},
		{"duplicate keys: last wins", "a=1\nb=x\na=2", Properties{"a": "2", "b": "x"}},
		{"CRLF", "a=b\r\nc=d\r\n", Properties{"a": "b", "c": "d"}},
		{"CR only", "a=b\rc=d\r", Properties{"a": "b", "c": "d"}},
		{"CRLF continuation", "a=b\\\r\n  c\r\nd=e", Properties{"a": "bc", "d": "e"}},
		{"CR continuation", "a=b\\\r  c\rd=e", Properties{"a": "bc", "d": "e"}},
		{"CRLF comment", "# c\r\na=b\r\n", Properties{"a": "b"}},
		{"UTF-8 BOM stripped", "\ufeffa=b\n", Properties{"a": "b"}},
		{"BOM only at the start", "a=\ufeff", Properties{"a": "\ufeff"}},
		{"BOM before comment", "\ufeff# c\na=b", Properties{"a": "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseProperties(strings.NewReader(tt.in))
			if err != nil {
				t.Fatalf("ParseProperties(%q): %v", tt.in, err)
			}
			if !maps.Equal(got, tt.want) {
				t.Fatalf("ParseProperties(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestParsePropertiesMalformedUnicode(t *testing.T) {
	tests := []struct {
		in   string
		line int
	}{
		{`a=\u004`, 1},
		{`a=\u`, 1},
		{`a=\u00G1`, 1},
		{`\uZZZZ=b`, 1},
		{"x=1\n\n# c\ny=\\u12", 4},
		{"x=1\r\ny=\\\r\n  \\u12\r\n", 2}, // reported where the logical line starts
	}
	for _, tt := range tests {
		_, err := ParseProperties(strings.NewReader(tt.in))
		var serr *SyntaxError
		if !errors.As(err, &serr) {
			t.Errorf("ParseProperties(%q): err = %v, want a SyntaxError", tt.in, err)
			continue
		}
		if serr.Line != tt.line || !strings.Contains(serr.Error(), `\u`) {
			t.Errorf("ParseProperties(%q): %v, want line %d", tt.in, serr, tt.line)
		}
	}
}

func TestLoadPropertiesFiles(t *testing.T) {
	tests := []struct {
		file string
		want Properties
	}{
		{"tricky-crlf-bom.properties", Properties{
			"server.port":           "9848",
			"indented.key":          "value with trailing spaces  ",
			"colon.sep":             "value",
			"space.sep":             "value",
			"empty.value":           "",
			"just.a.key":            "",
			"escaped=key:with seps": "v",
			"unicode":               "中文 and raw 中文",
			"continued":             "one,two,three",
			"dup":                   "last",
			"trailing.backslash":    "ends",
		}},
		{"nacos-application.properties", Properties{
			"nacos.server.main.port":                        "8848",
			"server.error.include-message":                  "ALWAYS",
			"nacos.inetutils.ip-address":                    "10.0.0.7",
			"nacos.lock.default_expire_time":                "20000",
			"nacos.lock.max_expire_time":                    "600000",
			"nacos.lock.expire.scan.interval":               "500",
			"nacos.lock.disconnect_grace_ms":                "3000",
			"nacos.lock.max_key_length":                     "2048",
			"nacos.core.auth.plugin.nacos.token.secret.key": "SecretKey01234567890123456789012345678901234567890123456789",
			"nacos.core.auth.server.identity.key":           "serverIdentity",
			"nacos.core.auth.server.identity.value":         "security",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := LoadProperties(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got, tt.want) {
				for _, k := range slices.Sorted(maps.Keys(got)) {
					if got[k] != tt.want[k] {
						t.Errorf("%q = %q, want %q", k, got[k], tt.want[k])
					}
				}
				t.Fatalf("got %d keys, want %d", len(got), len(tt.want))
			}
		})
	}
}

func TestLoadPropertiesErrors(t *testing.T) {
	if _, err := LoadProperties(filepath.Join(t.TempDir(), "missing.properties")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: err = %v, want ErrNotExist", err)
	}
	path := filepath.Join(t.TempDir(), "bad.properties")
	if err := os.WriteFile(path, []byte("a=\\uXYZW\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := LoadProperties(path)
	var serr *SyntaxError
	if !errors.As(err, &serr) || !strings.Contains(err.Error(), path) {
		t.Fatalf("bad file: err = %v, want a SyntaxError naming the path", err)
	}
}

// storeProperty writes key=value the way Java's Properties.store escapes,
// except that non-ASCII stays UTF-8 (we read UTF-8). Only tests use it.
func storeProperty(b *strings.Builder, key, value string) {
	escape := func(s string) {
		for _, r := range s {
			switch r {
			case '\\', '=', ':', '#', '!', ' ':
				b.WriteByte('\\')
				b.WriteRune(r)
			case '\t':
				b.WriteString(`\t`)
			case '\n':
				b.WriteString(`\n`)
			case '\r':
				b.WriteString(`\r`)
			case '\f':
				b.WriteString(`\f`)
			default:
				if r < 0x20 || r == 0x7f {
					b.WriteString(`\u00`)
					b.WriteByte("0123456789abcdef"[r>>4])
					b.WriteByte("0123456789abcdef"[r&0xf])
				} else {
					b.WriteRune(r)
				}
			}
		}
	}
	escape(key)
	b.WriteByte('=')
	escape(value)
	b.WriteByte('\n')
}

func FuzzParseProperties(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.properties"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seed files: %v", err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{"a=b\\", "\\\n", "a\\u12", "\\uD83D\\uDE00=\\uDE00", "\r\n\\\r\n#", "a\\\n\\\n\\"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		props, err := ParseProperties(strings.NewReader(string(data)))
		if err != nil {
			var serr *SyntaxError
			if !errors.As(err, &serr) || serr.Line < 1 {
				t.Fatalf("error without a line: %v", err)
			}
			return
		}
		// Whatever we parse, we can write back and read again unchanged.
		var b strings.Builder
		for _, k := range slices.Sorted(maps.Keys(props)) {
			if !utf8.ValidString(k) || !utf8.ValidString(props[k]) {
				t.Fatalf("invalid UTF-8 in %q=%q", k, props[k])
			}
			storeProperty(&b, k, props[k])
		}
		again, err := ParseProperties(strings.NewReader(b.String()))
		if err != nil {
			t.Fatalf("re-parse of %q: %v", b.String(), err)
		}
		if !maps.Equal(props, again) {
			t.Fatalf("round trip changed the properties:\n%q\n%q", props, again)
		}
	})
}
