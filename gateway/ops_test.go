package gateway

import (
	"slices"
	"testing"

	"nacos-lockd/protocol"
	"nacos-lockd/statemachine"
)

// Every Op the table knows is either a client operation, with a complete
// row, or named as the server's own; every Code has a verdict.
func TestEveryOpAndCodeHasARow(t *testing.T) {
	seen := map[statemachine.Op]int{}
	for _, o := range clientOps {
		seen[o.op]++
		if o.wire == "" || o.label == "" || o.okLabel == "" || o.nacosGroup == "" || o.writeFailure == "" {
			t.Errorf("%s: incomplete row %+v", o.op, o)
		}
		if got, ok := clientOpByWire(o.wire); !ok || got.op != o.op {
			t.Errorf("%s: not found by its wire name %q", o.op, o.wire)
		}
	}
	for _, op := range serverOps {
		seen[op]++
	}
	for _, op := range statemachine.Ops() {
		if seen[op] != 1 {
			t.Errorf("%s: in %d of clientOps and serverOps, want exactly 1", op, seen[op])
		}
	}
	if len(seen) != len(statemachine.Ops()) {
		t.Errorf("rows for %d ops, the table has %d", len(seen), len(statemachine.Ops()))
	}
	for _, c := range statemachine.Codes() {
		v := verdictOf(c)
		if c == statemachine.CodeOK {
			if v.message != "" {
				t.Errorf("success carries a message %q", v.message)
			}
			continue
		}
		if v.label == "" || v.message == "" {
			t.Errorf("%s: incomplete verdict %+v", c, v)
		}
		if v.limit != "" && !slices.Contains(limitLabels, v.limit) {
			t.Errorf("%s: limit %q is not among the registered limit labels", c, v.limit)
		}
		if !slices.Contains(resultLabels, v.label) {
			t.Errorf("%s: label %q is not among the registered result labels", c, v.label)
		}
	}
	for _, o := range clientOps {
		if !slices.Contains(opLabels, o.label) || !slices.Contains(resultLabels, o.okLabel) {
			t.Errorf("%s: labels %q/%q are not registered", o.op, o.label, o.okLabel)
		}
	}
	// A client naming a server operation, or none, gets no handler.
	for _, w := range []protocol.LockOp{protocol.OpExpire, protocol.OpCleanupConnection, "", "acquire"} {
		if _, ok := clientOpByWire(w); ok {
			t.Errorf("%q is taken as a client operation", w)
		}
		if writeFailure(w) != invalidWriteFailure || nacosOpOf(w) != invalidNacosGroup {
			t.Errorf("%q: %q, %q", w, writeFailure(w), nacosOpOf(w))
		}
	}
}
