package connid

import (
	"math"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

var at = time.UnixMilli(1700000000123)

// strAddr is a net.Addr of any text (a unix socket, an in-memory pipe).
type strAddr string

func (a strAddr) Network() string { return "test" }
func (a strAddr) String() string  { return string(a) }

func TestNew(t *testing.T) {
	for _, c := range []struct {
		name   string
		remote net.Addr
		node   string
		want   string
	}{
		{"IPv4", &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 5000}, "3", "1700000000123_10.0.0.1_5000_3"},
		{"IPv6", &net.TCPAddr{IP: net.IPv6loopback, Port: 5000}, "12", "1700000000123_::1_5000_12"},
		{"IPv6 zone", &net.TCPAddr{IP: net.ParseIP("fe80::1"), Port: 443, Zone: "eth0"}, "7", "1700000000123_fe80::1%eth0_443_7"},
		{"zone with _", &net.TCPAddr{IP: net.ParseIP("fe80::1"), Port: 1, Zone: "br_lan_0"}, "18446744073709551615", "1700000000123_fe80::1%br_lan_0_1_18446744073709551615"},
		{"IPv4-mapped", &net.TCPAddr{IP: net.ParseIP("::ffff:192.0.2.1"), Port: 65535}, "1", "1700000000123_192.0.2.1_65535_1"},
		{"no node", &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 5000}, "", "1700000000123_10.0.0.1_5000"},
		{"nil remote", nil, "1", "1700000000123_unknown_0_1"},
		{"not host:port", strAddr("bufconn"), "1", "1700000000123_unknown_0_1"},
		{"port not a number", strAddr("host:http"), "1", "1700000000123_unknown_0_1"},
		{"port out of range", strAddr("10.0.0.1:65536"), "1", "1700000000123_unknown_0_1"},
		{"empty host", &net.TCPAddr{Port: 9}, "1", "1700000000123_unknown_9_1"},
		{"hostname", strAddr("localhost:80"), "2", "1700000000123_localhost_80_2"},
	} {
		id := New(at, c.remote, c.node)
		if got := id.String(); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
		if back, ok := Parse(id.String()); !ok || back != id {
			t.Errorf("%s: Parse(%q) = %+v %v, want %+v", c.name, id.String(), back, ok, id)
		}
	}
}

// TestNewMatchesTCPAddr pins New to what the gateway did before this
// package: SplitHostPort of the remote's String.
func TestNewMatchesTCPAddr(t *testing.T) {
	for _, a := range []*net.TCPAddr{
		{IP: net.IPv4(127, 0, 0, 1), Port: 54321},
		{IP: net.ParseIP("2001:db8::1"), Port: 8848},
		{IP: net.ParseIP("fe80::abcd"), Port: 9848, Zone: "en_0"},
	} {
		h, p, _ := net.SplitHostPort(a.String())
		if got, want := New(at, a, "5").String(), "1700000000123_"+h+"_"+p+"_5"; got != want {
			t.Errorf("%v: %q, want %q", a, got, want)
		}
	}
}

func TestParse(t *testing.T) {
	for s, want := range map[string]ID{
		"1700000000000_10.0.0.1_5000_3":                    {1700000000000, "10.0.0.1", 5000, "3"},
		"1700000000000_::1_5000_12":                        {1700000000000, "::1", 5000, "12"},
		"1700000000000_fe80::1%eth0_5000_2":                {1700000000000, "fe80::1%eth0", 5000, "2"},
		"1700000000000_fe80::1%eth_0_5000_2":               {1700000000000, "fe80::1%eth_0", 5000, "2"},
		"1700000000000_fe80::1%a_b_c_0_1":                  {1700000000000, "fe80::1%a_b_c", 0, "1"},
		"1700000000000_unknown_0_1":                        {1700000000000, "unknown", 0, "1"},
		"0_x_0_0":                                          {0, "x", 0, "0"},
		"-1_x_1_1":                                         {-1, "x", 1, "1"},
		"9223372036854775807_x_1_1":                        {math.MaxInt64, "x", 1, "1"},
		"-9223372036854775808_x_1_1":                       {math.MinInt64, "x", 1, "1"},
		"1_x_65535_18446744073709551615":                   {1, "x", 65535, "18446744073709551615"},
		"1_2_3_4_5":                                        {1, "2_3", 4, "5"},
		"1_ _1_1":                                          {1, " ", 1, "1"},
		"1__x_1_1":                                         {1, "_x", 1, "1"},
		"1_x__1_1":                                         {1, "x_", 1, "1"},
		"1700000000000_10.0.0.1_8848":                      {1700000000000, "10.0.0.1", 8848, ""},             // Nacos's
		"1700000000000_0:0:0:0:0:0:0:1_52001":              {1700000000000, "0:0:0:0:0:0:0:1", 52001, ""},     // Java writes IPv6 in full
		"1700000000000_fe80:0:0:0:0:0:0:1%eth0_1":          {1700000000000, "fe80:0:0:0:0:0:0:1%eth0", 1, ""}, // and a zone by name
		"1700000000000_fe80::1%my_if_5000":                 {1700000000000, "fe80::1%my_if", 5000, ""},        // "if" is no port: Nacos's
		"1700000000000_fe80::1%eth_0_5000":                 {1700000000000, "fe80::1%eth", 0, "5000"},         // both fit: ours wins
		"1700000000000_fe80::1%eth_0_5000_x":               {},                                                // node is no number
		"1700000000000_fe80::1%eth_99999_5000":             {1700000000000, "fe80::1%eth_99999", 5000, ""},    // 99999 is no port
		"1700000000000_10.0.0.1_5000_18446744073709551616": {},                                                // node overflows uint64
		// A bad port in our shape leaves Nacos's, with the IP taking the '_':
		"1_x_65536_1": {1, "x_65536", 1, ""},
		"1_x_01_1":    {1, "x_01", 1, ""},
		"1__1_1":      {1, "_1", 1, ""},
		"1_x__1":      {1, "x_", 1, ""},
	} {
		got, ok := Parse(s)
		if ok != (want != ID{}) || got != want {
			t.Errorf("Parse(%q) = %+v %v, want %+v", s, got, ok, want)
		}
		if ok && got.String() != s {
			t.Errorf("Parse(%q) formats back as %q", s, got.String())
		}
		if n := NodeOf(s); n != want.Node {
			t.Errorf("NodeOf(%q) = %q, want %q", s, n, want.Node)
		}
	}
}

// TestForeign lists shapes that are neither ours nor Nacos's.
func TestForeign(t *testing.T) {
	for _, s := range []string{
		"", "_", "__", "___", "____", "c1", "nacos-conn", "imported-conn", "a_b_c_d", "a_b_c",
		"1", "1_", "1_x", "1_x_", "1__1", "_x_1_1", "1_x_1_",
		"01_x_1_1", "+1_x_1_1", "-0_x_1_1", "- 1_x_1_1", "1.5_x_1_1", "9223372036854775808_x_1_1",
		"-9223372036854775809_x_1_1", "99999999999999999999_x_1_1",
		"1_x_1_01", "1_x_1_-1", "1_x_1_n1",
		"1_x_1_1 ", "1_x_01", "1_x_65536", "1_x_p", "1_x_1_1_", "1700000000000_10.0.0.1_5000_n1",
		"1_x_1_\x00", "\xff_x_1_1", "1_x_1_١", // Arabic-Indic digit one
	} {
		if id, ok := Parse(s); ok {
			t.Errorf("Parse(%q) = %+v, want foreign", s, id)
		}
		if n := NodeOf(s); n != "" {
			t.Errorf("NodeOf(%q) = %q, want \"\"", s, n)
		}
	}
}

// ambiguous reports the one case where Parse(x.String()) is not x (see
// the package comment): no node, and an IP ending in _<port>.
func ambiguous(x ID) bool {
	if x.Node != "" {
		return false
	}
	k := strings.LastIndexByte(x.IP, '_')
	_, port := parsePort(x.IP[k+1:])
	return k > 0 && port
}

// TestRoundTrip: Parse(String(x)) == x for every valid id but the
// ambiguous ones, and those read as ours.
func TestRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	ips := []string{"10.0.0.1", "::1", "2001:db8::8:800:200c:417a", "fe80::1%eth0", "fe80::1%br_lan", "fe80::1%eth_0",
		"fe80::1%a_1_2", "unknown", "localhost", "_", "x_", "_1", "::ffff:1.2.3.4", "0:0:0:0:0:0:0:1"}
	millis := []int64{0, 1, -1, 1700000000000, math.MaxInt64, math.MinInt64}
	ports := []uint16{0, 1, 80, 8848, 65535}
	nodes := []string{"", "0", "1", "42", "9223372036854775807", "18446744073709551615"}
	randText := func() string {
		b := make([]byte, 1+r.IntN(12))
		for i := range b {
			b[i] = "0123456789_:%.ab\x00\xff"[r.IntN(17)]
		}
		return string(b)
	}
	seen := 0
	for range 20000 {
		x := ID{Millis: millis[r.IntN(len(millis))], IP: ips[r.IntN(len(ips))], Port: ports[r.IntN(len(ports))], Node: nodes[r.IntN(len(nodes))]}
		switch r.IntN(4) {
		case 0:
			x.Millis = r.Int64() - r.Int64()
		case 1:
			x.IP = randText()
		case 2:
			x.Port = uint16(r.Uint32())
			x.Node = strconv.FormatUint(r.Uint64()>>r.IntN(64), 10)
		}
		got, ok := Parse(x.String())
		if ambiguous(x) {
			seen++
			if !ok || got.Node == "" || got.String() != x.String() {
				t.Fatalf("ambiguous %+v (%q) parsed as %+v %v, want ours", x, x.String(), got, ok)
			}
			continue
		}
		if !ok || got != x {
			t.Fatalf("Parse(%q) = %+v %v, want %+v", x.String(), got, ok, x)
		}
		if NodeOf(x.String()) != x.Node {
			t.Fatalf("NodeOf(%q) = %q, want %q", x.String(), NodeOf(x.String()), x.Node)
		}
	}
	if seen == 0 {
		t.Fatal("the generator made no ambiguous id: it does not cover the rule")
	}
}

func TestValidNode(t *testing.T) {
	for s, want := range map[string]bool{
		"0": true, "1": true, "12": true, "18446744073709551615": true,
		"": false, "01": false, "18446744073709551616": false, "99999999999999999999": false,
		"100000000000000000000": false, "n1": false, "-1": false, "+1": false, "1_2": false, " 1": false,
	} {
		if ValidNode(s) != want {
			t.Errorf("ValidNode(%q) = %v", s, !want)
		}
	}
}

func TestNoAllocs(t *testing.T) {
	ids := []string{"1700000000000_10.0.0.1_5000_3", "1700000000000_10.0.0.1_8848", "nacos-conn", "9999999999999999999_x_1_1"}
	if n := testing.AllocsPerRun(100, func() {
		for _, s := range ids {
			NodeOf(s)
			Parse(s)
		}
	}); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}

// FuzzParse: Parse never panics, whatever it accepts formats back to the
// same text, and NodeOf agrees with it. The seeds run in every go test;
// go test -fuzz=FuzzParse explores further.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"1700000000000_10.0.0.1_5000_3", "1700000000000_::1_5000_12", "1700000000000_fe80::1%eth_0_5000_2",
		"1700000000000_10.0.0.1_8848", "1700000000000_fe80:0:0:0:0:0:0:1%eth0_1", "1700000000000_fe80::1%eth_0_5000",
		"1700000000000_unknown_0_1", "-9223372036854775808_x_65535_18446744073709551615", "9223372036854775808_x_1_1",
		"1_2_3_4_5", "", "_", "____", "c1", "nacos-conn", "01_x_1_1", "1_x_1_n1", "1_x_65536_1", "\xff_\x00_1_1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, ok := Parse(s)
		if n := NodeOf(s); n != id.Node {
			t.Fatalf("NodeOf(%q) = %q, Parse %+v", s, n, id)
		}
		if !ok {
			if id != (ID{}) {
				t.Fatalf("foreign %q gave %+v", s, id)
			}
			return
		}
		if got := id.String(); got != s {
			t.Fatalf("Parse(%q) = %+v formats as %q", s, id, got)
		}
		if id.IP == "" || (id.Node != "" && !ValidNode(id.Node)) {
			t.Fatalf("Parse(%q) = %+v: not a valid id", s, id)
		}
		if again, ok := Parse(id.String()); !ok || again != id {
			t.Fatalf("Parse(%q) twice: %+v then %+v", s, id, again)
		}
	})
}
