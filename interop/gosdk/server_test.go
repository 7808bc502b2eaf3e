package gosdk

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/common/logger"
)

// The binary under test: $NACOS_LOCKD_BINARY, else <repo>/bin/nacos-lockd.
func binary(t *testing.T) string {
	t.Helper()
	p := os.Getenv("NACOS_LOCKD_BINARY")
	if p == "" {
		p = filepath.Join("..", "..", "bin", "nacos-lockd")
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(abs); err != nil || st.IsDir() {
		t.Fatalf("nacos-lockd binary not found at %s (set NACOS_LOCKD_BINARY or run: go build -o bin/nacos-lockd ./cmd/nacos-lockd)", abs)
	}
	return abs
}

// lockd is one nacos-lockd process: --port P --data-dir D [--config F].
type lockd struct {
	t       *testing.T
	name    string
	bin     string
	port    int
	dataDir string
	config  map[string]string
	cmd     *exec.Cmd
	stderr  *syncBuffer
	logs    []string // stderr of earlier processes (restarts)
	done    chan struct{}
	exit    error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func free(port int) bool {
	for _, host := range []string{"", "127.0.0.1"} {
		l, err := net.Listen("tcp", fmt.Sprintf("%s:%d", host, port))
		if err != nil {
			return false
		}
		l.Close()
	}
	return true
}

// startLockd starts a server with fresh ports and data dir and stops it
// (SIGTERM, expecting exit 0) when the test ends.
func startLockd(t *testing.T, name string, config map[string]string) *lockd {
	t.Helper()
	s := &lockd{t: t, name: name, bin: binary(t), dataDir: t.TempDir(), config: config}
	for i := 0; ; i++ {
		p := 11000 + rand.IntN(20000)
		if free(p-1000) && free(p) && free(p+1000) {
			s.port = p
			break
		}
		if i > 200 {
			t.Fatal("no free port triple")
		}
	}
	s.launch()
	t.Cleanup(func() {
		if s.cmd == nil {
			return
		}
		alive := s.alive()
		err := s.stop()
		if t.Failed() {
			t.Logf("---- %s stderr (tail) ----\n%s", s.name, tail(s.stderr.String(), 40))
		}
		if !alive {
			t.Errorf("%s was no longer running at the end of the test (%v)", s.name, err)
		} else if err != nil {
			t.Errorf("%s: exit after SIGTERM: %v", s.name, err)
		}
	})
	return s
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func (s *lockd) launch() {
	t := s.t
	t.Helper()
	args := []string{"--port", fmt.Sprint(s.port), "--data-dir", s.dataDir}
	if len(s.config) > 0 {
		keys := make([]string, 0, len(s.config))
		for k := range s.config {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var b strings.Builder
		for _, k := range keys {
			fmt.Fprintf(&b, "%s=%s\n", k, s.config[k])
		}
		f := filepath.Join(t.TempDir(), "application.properties")
		if err := os.WriteFile(f, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--config", f)
	}
	if s.stderr != nil {
		s.logs = append(s.logs, s.stderr.String())
	}
	s.stderr = &syncBuffer{}
	s.cmd = exec.Command(s.bin, args...)
	s.cmd.Stderr = s.stderr
	s.done = make(chan struct{})
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		s.exit = s.cmd.Wait()
		close(s.done)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(s.stderr.String(), `"message":"nacos-lockd ready"`) {
		select {
		case <-s.done:
			t.Fatalf("%s exited before it was ready (%v):\n%s", s.name, s.exit, s.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			_ = s.cmd.Process.Signal(syscall.SIGQUIT) // goroutine dump on stderr
			<-s.done
			t.Fatalf("%s not ready within 30 s:\n%s", s.name, s.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *lockd) alive() bool {
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM and waits (SIGKILL after 10 s); nil means exit 0.
func (s *lockd) stop() error {
	if s.alive() {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
		return errors.New("did not exit within 10 s of SIGTERM")
	}
	return s.exit
}

// restart stops the process (SIGTERM, or SIGKILL when kill) and starts it on
// the same ports and data dir.
func (s *lockd) restart(kill bool) {
	s.t.Helper()
	if kill {
		_ = s.cmd.Process.Kill()
		<-s.done
	} else if err := s.stop(); err != nil {
		s.t.Fatalf("%s: exit after SIGTERM: %v", s.name, err)
	}
	s.launch()
}

func (s *lockd) server() Server { return Server{IP: "127.0.0.1", Port: uint64(s.port)} }

// fileLogger sends the SDK's log to a file instead of the console.
type fileLogger struct {
	mu sync.Mutex
	f  *os.File
}

func (l *fileLogger) log(level, msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.f, "%s %s %s\n", time.Now().Format("15:04:05.000"), level, msg)
}
func (l *fileLogger) Info(a ...interface{})             { l.log("INFO", fmt.Sprint(a...)) }
func (l *fileLogger) Warn(a ...interface{})             { l.log("WARN", fmt.Sprint(a...)) }
func (l *fileLogger) Error(a ...interface{})            { l.log("ERROR", fmt.Sprint(a...)) }
func (l *fileLogger) Debug(a ...interface{})            {}
func (l *fileLogger) Infof(f string, a ...interface{})  { l.log("INFO", fmt.Sprintf(f, a...)) }
func (l *fileLogger) Warnf(f string, a ...interface{})  { l.log("WARN", fmt.Sprintf(f, a...)) }
func (l *fileLogger) Errorf(f string, a ...interface{}) { l.log("ERROR", fmt.Sprintf(f, a...)) }
func (l *fileLogger) Debugf(f string, a ...interface{}) {}

var sdkLog string

func TestMain(m *testing.M) {
	dir := os.Getenv("GOSDK_LOG_DIR")
	if dir == "" {
		dir = os.TempDir()
	}
	sdkLog = filepath.Join(dir, "nacos-sdk-go.log")
	f, err := os.Create(sdkLog)
	if err != nil {
		panic(err)
	}
	logger.SetLogger(&fileLogger{f: f})
	code := m.Run()
	f.Close()
	os.Exit(code)
}
