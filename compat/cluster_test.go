package compat

import (
	"strings"
	"testing"
)

func TestParseClusterConf(t *testing.T) {
	conf := `# Nacos cluster.conf
127.0.0.1:8850
127.0.0.1:8848   # the first node
10.0.0.3
10.0.0.4:9848?raft_port=7000, 10.0.0.5:8848
`
	got, err := ParseClusterConf(strings.NewReader(conf))
	if err != nil {
		t.Fatal(err)
	}
	want := []Member{
		{"10.0.0.3", 8848, 7848},
		{"10.0.0.4", 9848, 7000},
		{"10.0.0.5", 8848, 7848},
		{"127.0.0.1", 8848, 7848},
		{"127.0.0.1", 8850, 7850},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("member %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if m, ok := FindMember(got, "127.0.0.1", 8850); !ok || m.GRPCPort() != 9850 || m.RaftAddress() != "127.0.0.1:7850" {
		t.Fatalf("find: %+v %v", m, ok)
	}
	if _, ok := FindMember(got, "127.0.0.1", 8849); ok {
		t.Fatal("found a member that is not listed")
	}
}

func TestReplicaIDsAreStable(t *testing.T) {
	a, _ := ParseMember("127.0.0.1:8848")
	b, _ := ParseMember("127.0.0.1:8849")
	if a.ReplicaID() == 0 || a.ReplicaID() == b.ReplicaID() {
		t.Fatalf("ids %d %d", a.ReplicaID(), b.ReplicaID())
	}
	// Same address, same id, whatever else the file lists.
	one, _ := ParseClusterConf(strings.NewReader("127.0.0.1:8848\n"))
	three, _ := ParseClusterConf(strings.NewReader("127.0.0.1:8850\n127.0.0.1:8849\n127.0.0.1:8848\n"))
	m, _ := FindMember(three, "127.0.0.1", 8848)
	if one[0].ReplicaID() != m.ReplicaID() || m.ReplicaID() != a.ReplicaID() {
		t.Fatal("replica id depends on the member list")
	}
}

func TestParseClusterConfRejects(t *testing.T) {
	for conf, want := range map[string]string{
		"":                                "no members",
		"# only a comment\n":              "no members",
		"127.0.0.1:8848\n127.0.0.1:8848":  "already listed on line 1",
		"node_a:8848":                     "neither an IP address nor a DNS name",
		"-node:8848":                      "neither an IP address nor a DNS name",
		"a..b:8848":                       "neither an IP address nor a DNS name",
		"10.0.0.300:8848":                 "neither an IP address nor a DNS name",
		"Node-A:8848\nnode-a:8848":        "already listed on line 1",
		"127.0.0.1:80":                    "1001..64535",
		"127.0.0.1:x":                     "1001..64535",
		"127.0.0.1:8848?raft_port=banana": "raft_port",
	} {
		_, err := ParseClusterConf(strings.NewReader(conf))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want an error containing %q", conf, err, want)
		}
	}
}

// Members listed by name: the id hashes the name as written (lower case),
// so it does not depend on what the name resolves to, and IP members keep
// the ids they always had (pinned: a changed id would make every existing
// cluster's data dirs disagree with their cluster.conf).
func TestReplicaIDsOfNames(t *testing.T) {
	for addr, want := range map[string]uint64{
		"127.0.0.1:8848": 0x56a302ae2a9987d0,
		"10.0.0.1:8848":  0x50d69e76f1d47849,
	} {
		m, err := ParseMember(addr)
		if err != nil {
			t.Fatal(err)
		}
		if m.IsName() || m.ReplicaID() != want {
			t.Errorf("%s: id %#x, name %v; want %#x, not a name", addr, m.ReplicaID(), m.IsName(), want)
		}
	}
	conf := "nacos-lockd-1.nacos-lockd-headless.ns.svc.cluster.local:8848\nNACOS-LOCKD-0.nacos-lockd-headless.ns.svc.cluster.local:8848?raft_port=7000\nlocalhost:8850\n"
	got, err := ParseClusterConf(strings.NewReader(conf))
	if err != nil {
		t.Fatal(err)
	}
	want := []Member{
		{"localhost", 8850, 7850},
		{"nacos-lockd-0.nacos-lockd-headless.ns.svc.cluster.local", 8848, 7000},
		{"nacos-lockd-1.nacos-lockd-headless.ns.svc.cluster.local", 8848, 7848},
	}
	for i := range want {
		if i >= len(got) || got[i] != want[i] || !got[i].IsName() {
			t.Fatalf("members %+v, want %+v (all names)", got, want)
		}
	}
	if got[1].RaftAddress() != "nacos-lockd-0.nacos-lockd-headless.ns.svc.cluster.local:7000" {
		t.Fatalf("raft address %s", got[1].RaftAddress())
	}
	if m, ok := FindMember(got, "Nacos-Lockd-0.nacos-lockd-headless.ns.svc.cluster.local", 8848); !ok || m != got[1] {
		t.Fatalf("find by name in another case: %+v %v", m, ok)
	}
	// The id is the name's: another spelling of it agrees, an IP it may
	// resolve to does not.
	upper, _ := ParseMember("LOCALHOST:8850")
	ip, _ := ParseMember("127.0.0.1:8850")
	if upper.ReplicaID() != got[0].ReplicaID() || ip.ReplicaID() == got[0].ReplicaID() {
		t.Fatalf("ids: localhost %d, LOCALHOST %d, 127.0.0.1 %d", got[0].ReplicaID(), upper.ReplicaID(), ip.ReplicaID())
	}
}
