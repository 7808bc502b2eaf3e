// Command gentool fetches the pinned protoc artifacts for protocol/gen.sh.
//
// It exists so that gen.sh needs nothing but Go and network access: no curl,
// no unzip, no sha256sum. Every download is checked against a SHA-256 pinned
// in gen.sh, so a changed artifact fails the build instead of changing the
// generated code.
//
//	gentool fetch -url URL -sha256 HEX -out FILE [-exec]
//	gentool unzip -zip FILE -entry NAME -dir DIR
package main

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "gentool:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: gentool fetch|unzip [flags]")
	}
	switch args[0] {
	case "fetch":
		fs := flag.NewFlagSet("fetch", flag.ContinueOnError)
		url := fs.String("url", "", "artifact URL")
		sum := fs.String("sha256", "", "expected SHA-256, hex")
		out := fs.String("out", "", "destination file")
		exe := fs.Bool("exec", false, "make the file executable")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if *url == "" || *sum == "" || *out == "" {
			return errors.New("fetch needs -url, -sha256 and -out")
		}
		return fetch(*url, strings.ToLower(*sum), *out, *exe)
	case "unzip":
		fs := flag.NewFlagSet("unzip", flag.ContinueOnError)
		zipPath := fs.String("zip", "", "zip or jar file")
		entry := fs.String("entry", "", "entry to extract, e.g. google/protobuf/any.proto")
		dir := fs.String("dir", "", "destination root; the entry keeps its path below it")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if *zipPath == "" || *entry == "" || *dir == "" {
			return errors.New("unzip needs -zip, -entry and -dir")
		}
		return unzip(*zipPath, *entry, *dir)
	}
	return fmt.Errorf("unknown command %q", args[0])
}

// fetch leaves out alone when it already has the pinned digest, so a warm
// cache makes gen.sh work offline.
func fetch(url, want, out string, exe bool) error {
	if got, err := fileSHA256(out); err == nil && got == want {
		return chmod(out, exe)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	client := &http.Client{Timeout: 5 * time.Minute}
	resp, err := client.Get(url)
	if err != nil {
		return fmt.Errorf("download %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("download %s: HTTP %s", url, resp.Status)
	}
	tmp, err := os.CreateTemp(filepath.Dir(out), ".gentool-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(tmp, h), resp.Body); err != nil {
		tmp.Close()
		return fmt.Errorf("download %s: %w", url, err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return fmt.Errorf("download %s: sha256 %s, want %s", url, got, want)
	}
	if err := chmod(tmp.Name(), exe); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), out)
}

func chmod(path string, exe bool) error {
	if !exe {
		return os.Chmod(path, 0o644)
	}
	return os.Chmod(path, 0o755)
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func unzip(zipPath, entry, dir string) error {
	if !filepath.IsLocal(entry) {
		return fmt.Errorf("entry %q is not a local path", entry)
	}
	zr, err := zip.OpenReader(zipPath)
	if err != nil {
		return err
	}
	defer zr.Close()
	for _, f := range zr.File {
		if f.Name != entry {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return err
		}
		defer rc.Close()
		data, err := io.ReadAll(rc)
		if err != nil {
			return fmt.Errorf("read %s from %s: %w", entry, zipPath, err)
		}
		dst := filepath.Join(dir, filepath.FromSlash(entry))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o644)
	}
	return fmt.Errorf("%s has no entry %s", zipPath, entry)
}
