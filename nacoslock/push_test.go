package nacoslock

import (
	"testing"

	"nacos-lockd/protocol"
)

// The session's answers to the server's pushes, as the Java client gives
// them: every push is acknowledged with its requestId; a detection probe
// is only acknowledged; a reset from the current connection makes the
// session move, to the server it names when that one is in the list (and
// is not the one it is on), else to the next in the list; a reset from a
// connection already left behind changes nothing. nacos-lockd never sends
// ClientDetectionRequest (Nacos servers probe idle connections with it),
// and leaves ConnectResetRequest's serverIp empty, so these paths are
// checked here at the handler.
func TestPushAnswers(t *testing.T) {
	servers := []string{"10.0.0.1:8848", "10.0.0.2:8848", "10.0.0.3:8848"}
	newClient := func() (*Client, *conn) {
		c := &conn{server: servers[0]}
		// As after Dial connected to the first server of the list.
		return &Client{servers: servers, next: 1, cur: c, reset: make(chan struct{}, 1), waits: map[pushKey]chan struct{}{}}, c
	}
	reqID := func(m protocol.Message) string { return protocol.RequestID(m) }

	cl, c := newClient()
	det := &protocol.ClientDetectionRequest{}
	det.RequestID = "41"
	resp, ok := cl.onPush(c, det).(*protocol.ClientDetectionResponse)
	if !ok || resp.ResultCode != 200 || resp.RequestID != "41" {
		t.Fatalf("ClientDetectionRequest: %#v", cl.onPush(c, det))
	}
	if len(cl.reset) != 0 {
		t.Fatal("a detection probe made the session move")
	}

	for _, tc := range []struct {
		name     string
		serverIP string
		from     *conn // nil: the current connection
		moves    bool
		next     string
	}{
		{"names a listed server", "10.0.0.3", nil, true, "10.0.0.3:8848"},
		{"names the server it is on", "10.0.0.1", nil, true, "10.0.0.2:8848"},
		{"names a server outside the list", "192.0.2.9", nil, true, "10.0.0.2:8848"},
		{"names none", "", nil, true, "10.0.0.2:8848"},
		{"from a connection left behind", "10.0.0.3", &conn{server: servers[1]}, false, "10.0.0.2:8848"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl, c := newClient()
			from := c
			if tc.from != nil {
				from = tc.from
			}
			r := &protocol.ConnectResetRequest{ServerIP: tc.serverIP, ServerPort: "8848"}
			r.RequestID = "7"
			resp, ok := cl.onPush(from, r).(*protocol.ConnectResetResponse)
			if !ok || resp.ResultCode != 200 || reqID(resp) != "7" {
				t.Fatalf("reply: %#v", resp)
			}
			if moved := len(cl.reset) == 1; moved != tc.moves {
				t.Fatalf("session moves: %v, want %v", moved, tc.moves)
			}
			if got := cl.pick(); got != tc.next {
				t.Fatalf("next server: %s, want %s", got, tc.next)
			}
		})
	}
}
