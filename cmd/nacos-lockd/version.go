package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Stamped by `make release` (-ldflags -X main.version=... and so on). A
// plain `go build` leaves them empty, and buildInfo falls back to what the
// Go toolchain recorded, so a binary built from a checkout still names its
// commit.
var (
	version   string
	commit    string
	buildDate string
)

// buildInfo is what --version prints and the start-up log carries.
type buildInfo struct {
	Version, Commit, Date, Go string
}

func currentBuild() buildInfo {
	b := buildInfo{Version: version, Commit: commit, Date: buildDate, Go: runtime.Version()}
	if info, ok := debug.ReadBuildInfo(); ok {
		modified := false
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				if b.Commit == "" {
					b.Commit = s.Value
				}
			case "vcs.time":
				if b.Date == "" {
					b.Date = s.Value
				}
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if b.Version == "" && modified && b.Commit != "" {
			b.Commit += "-dirty"
		}
	}
	if b.Version == "" {
		b.Version = "dev"
	}
	if b.Commit == "" {
		b.Commit = "unknown"
	}
	if b.Date == "" {
		b.Date = "unknown"
	}
	return b
}

func (b buildInfo) String() string {
	return fmt.Sprintf("nacos-lockd %s (commit %s, built %s, %s %s/%s)", b.Version, b.Commit, b.Date, b.Go, runtime.GOOS, runtime.GOARCH)
}
