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
		"node-a:8848":                     "not an IP address",
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
