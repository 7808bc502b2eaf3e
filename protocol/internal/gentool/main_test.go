package main

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
)

func TestFetch(t *testing.T) {
	const content = "protoc bytes"
	sum := sha256.Sum256([]byte(content))
	good := hex.EncodeToString(sum[:])
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path != "/protoc.exe" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(content))
	}))
	defer srv.Close()
	out := filepath.Join(t.TempDir(), "bin", "protoc")

	if err := fetch(srv.URL+"/protoc.exe", "00"+good[2:], out, true); err == nil {
		t.Fatal("fetch accepted a wrong digest")
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("a rejected download left %s behind: %v", out, err)
	}
	if err := fetch(srv.URL+"/missing", good, out, true); err == nil {
		t.Fatal("fetch accepted a 404")
	}
	if err := fetch(srv.URL+"/protoc.exe", good, out, true); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(out); err != nil || fi.Mode().Perm()&0o100 == 0 {
		t.Fatalf("stat %s: %v, %v", out, fi, err)
	}
	before := hits.Load()
	if err := fetch(srv.URL+"/protoc.exe", good, out, true); err != nil || hits.Load() != before {
		t.Fatalf("cached file was downloaded again (err %v)", err)
	}
}

func TestUnzip(t *testing.T) {
	dir := t.TempDir()
	jar := filepath.Join(dir, "x.jar")
	f, err := os.Create(jar)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	w, err := zw.Create("google/protobuf/any.proto")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = w.Write([]byte("syntax = \"proto3\";\n"))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	inc := filepath.Join(dir, "include")
	if err := unzip(jar, "google/protobuf/any.proto", inc); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(inc, "google", "protobuf", "any.proto")); err != nil || string(b) != "syntax = \"proto3\";\n" {
		t.Fatalf("extracted %q, %v", b, err)
	}
	if err := unzip(jar, "google/protobuf/nope.proto", inc); err == nil {
		t.Error("unzip of a missing entry succeeded")
	}
	if err := unzip(jar, "../escape", inc); err == nil {
		t.Error("unzip accepted a non-local entry")
	}
}
