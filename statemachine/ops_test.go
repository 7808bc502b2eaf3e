package statemachine

import (
	"fmt"
	"testing"
)

// minimalCommand is a command of op with every field its row needs.
func minimalCommand(op Op) Command {
	return Command{Op: op, NowMs: 1000, Kind: KindNonReentrant, Key: "k", Owner: "o", ConnID: "c", LeaseMs: 1000, Token: 7}
}

// Every Op has a complete row, and Apply dispatches every one: a command
// carrying what its row needs is never refused as malformed, and one
// missing any needed field always is.
func TestEveryOpIsApplied(t *testing.T) {
	if len(Ops()) != len(opSpecs)-1 {
		t.Fatalf("Ops() = %v: every value 1..%d must have a row", Ops(), len(opSpecs)-1)
	}
	for _, op := range Ops() {
		s, _ := op.spec()
		if s.needs == 0 {
			t.Errorf("%s: no needs in its row", op)
		}
		if res := NewTable().Apply(1, minimalCommand(op)); res.Code == CodeMalformed {
			t.Errorf("%s with every needed field: refused as malformed (not dispatched by Apply?)", op)
		}
		drop := map[needs]func(*Command){
			needLock:  func(c *Command) { c.Key = "" },
			needOwner: func(c *Command) { c.Owner = "" },
			needConn:  func(c *Command) { c.ConnID = "" },
			needLease: func(c *Command) { c.LeaseMs = 0 },
			needToken: func(c *Command) { c.Token = 0 },
		}
		for n, f := range drop {
			if s.needs&n == 0 {
				continue
			}
			c := minimalCommand(op)
			f(&c)
			if res := NewTable().Apply(1, c); res.Code != CodeMalformed {
				t.Errorf("%s missing need %b: got %s, want malformed", op, n, res.Code)
			}
		}
	}
	for _, op := range []Op{0, Op(len(opSpecs)), 255} {
		if res := NewTable().Apply(1, minimalCommand(op)); res.Code != CodeMalformed {
			t.Errorf("%s: got %s, want malformed", op, res.Code)
		}
	}
}

func TestEveryCodeAndKindIsNamed(t *testing.T) {
	for _, c := range Codes() {
		if codeNames[c] == "" {
			t.Errorf("Code %d has no name", c)
		}
	}
	if got := Code(len(codeNames)).String(); got != fmt.Sprintf("code_%d", len(codeNames)) {
		t.Errorf("an unknown code prints %q", got)
	}
	if len(Kinds()) != len(kindNames)-1 {
		t.Fatalf("Kinds() = %v: every value 1..%d must have a name", Kinds(), len(kindNames)-1)
	}
	for _, k := range Kinds() {
		if got, ok := ParseKind(k.String()); !ok || got != k {
			t.Errorf("ParseKind(%q) = %v, %v", k.String(), got, ok)
		}
	}
	for _, s := range []string{"", "nacos_lock", "Reentrant", "NON_REENTRANT ", "Kind(1)"} {
		if _, ok := ParseKind(s); ok {
			t.Errorf("ParseKind(%q) accepted: Nacos compares lock types exactly", s)
		}
	}
	if Kind(0).valid() || Kind(len(kindNames)).valid() {
		t.Error("a value with no name is a valid Kind")
	}
}
