package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"nacos-lockd/interop/client"
	"nacos-lockd/nacoslock"
	"nacos-lockd/protocol"
)

var lockCommands = map[string]bool{"try": true, "lock": true, "hold": true, "unlock": true, "renew": true}

type lockFlags struct {
	typ   string
	lease int64
	wait  int64
	owner string
}

func (c *ctl) lockCommand(ctx context.Context, cmd string, args []string) error {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(c.errOut)
	var f lockFlags
	fs.StringVar(&f.typ, "type", "NON_REENTRANT", "lock type: NACOS_LOCK, REENTRANT or NON_REENTRANT")
	fs.Int64Var(&f.lease, "lease", 30000, "lease in ms (renewed by lock and hold)")
	fs.Int64Var(&f.wait, "wait", -1, "ms to wait in the server's queue; -1 = do not wait (lock and hold default to 5 minutes)")
	host, _ := os.Hostname()
	fs.StringVar(&f.owner, "owner", fmt.Sprintf("nacos-lockctl@%s:%d", host, os.Getpid()), "owner identity")
	// The key and the flags in any order; after "--", hold's command (for
	// the other commands, a key that starts with "-").
	pos, command, _, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if cmd != "hold" {
		pos, command = append(pos, command...), nil
	}
	if len(pos) == 0 {
		return fmt.Errorf("%s: a lock key is required", cmd)
	}
	if len(pos) > 1 {
		return fmt.Errorf("%s: unexpected arguments %v", cmd, pos[1:])
	}
	key := pos[0]
	if (cmd == "lock" || cmd == "hold") && !flagSet(fs, "wait") {
		f.wait = 300000
	}
	if cmd == "hold" && len(command) == 0 {
		return errors.New("hold: give the command after --")
	}
	if cmd == "unlock" || cmd == "renew" {
		return c.ownerCommand(ctx, cmd, key, f)
	}
	return c.mutexCommand(ctx, cmd, key, f, command)
}

// ownerCommand releases or renews a lock for an owner that holds it from
// another process, one raw request: the Mutex of nacoslock only ever acts
// for a hold it took itself.
func (c *ctl) ownerCommand(ctx context.Context, cmd, key string, f lockFlags) error {
	cl, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	li := client.Instance(key, f.typ, f.owner, client.Ms(f.lease), client.Ms(f.wait))
	if cmd == "unlock" {
		li.ExpiredTime = client.Ms(0)
		r, err := c.call(ctx, cl, protocol.OpRelease, li)
		if err != nil {
			return err
		}
		return c.report(r, "released", "not released")
	}
	r, err := c.call(ctx, cl, protocol.OpRenew, li)
	if err != nil {
		return err
	}
	return c.report(r, "renewed", "not renewed")
}

// mutexCommand runs try, lock and hold on the nacoslock package, as an
// application would: FIFO wait woken by the server's push, the watchdog,
// Lost.
func (c *ctl) mutexCommand(ctx context.Context, cmd, key string, f lockFlags, command []string) error {
	kind, ok := map[string]nacoslock.Kind{
		protocol.LockTypeNonReentrant: nacoslock.NonReentrant,
		protocol.LockTypeReentrant:    nacoslock.Reentrant,
		protocol.LockTypeNacos:        nacoslock.Legacy,
	}[f.typ]
	if !ok {
		return fmt.Errorf("--type %q: want NACOS_LOCK, REENTRANT or NON_REENTRANT", f.typ)
	}
	dctx, cancel := context.WithTimeout(ctx, c.timeout)
	opts := []nacoslock.Option{nacoslock.WithClientName("nacos-lockctl")}
	if c.token != "" {
		opts = append(opts, nacoslock.WithAccessToken(c.token))
	}
	cl, err := nacoslock.Dial(dctx, []string{c.server}, opts...)
	cancel()
	if err != nil {
		return fmt.Errorf("connect to %s: %w", c.server, err)
	}
	defer cl.Close()
	m := cl.Mutex(key, nacoslock.WithKind(kind), nacoslock.WithOwner(f.owner),
		nacoslock.WithLease(time.Duration(f.lease)*time.Millisecond))
	if err := c.take(ctx, m, f.wait); err != nil {
		return err
	}
	if cmd == "try" {
		// try takes the lock and leaves: the connection closes as the CLI
		// exits, and the server frees a closed connection's locks. Say
		// so, or a user expects to hold it.
		fmt.Fprintf(c.errOut, "%s is released as nacos-lockctl exits; to keep it, use lock or hold\n", key)
		return c.granted(m)
	}
	token := m.FencingToken()
	var runErr error
	if cmd == "hold" {
		fmt.Fprintf(c.errOut, "holding %s (fencing token %d)\n", key, token)
		runErr = runHeld(ctx, m, command, key, token)
	} else {
		fmt.Fprintf(c.out, "holding %s (fencing token %d); interrupt to release\n", key, token)
		select {
		case <-ctx.Done():
		case <-m.Lost():
		}
	}
	lost := m.Err()
	relCtx, cancelRel := context.WithTimeout(context.Background(), c.timeout)
	relErr := m.Unlock(relCtx)
	cancelRel()
	switch {
	case lost != nil:
		return fmt.Errorf("lock lost while held: %w", lost)
	case runErr != nil:
		return runErr
	case relErr != nil:
		return fmt.Errorf("release: %w", relErr)
	}
	return nil
}

// take acquires: one attempt when wait < 0, else waiting in the queue up
// to wait ms. A refusal is reported and exits 3.
func (c *ctl) take(ctx context.Context, m *nacoslock.Mutex, wait int64) error {
	var err error
	if wait < 0 {
		tctx, cancel := context.WithTimeout(ctx, c.timeout)
		err = m.TryLock(tctx)
		cancel()
	} else {
		wctx, cancel := context.WithTimeout(ctx, time.Duration(wait)*time.Millisecond)
		err = m.Lock(wctx)
		cancel()
		if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return c.refused(fmt.Sprintf("still queued after %d ms", wait))
		}
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, nacoslock.ErrLocked):
		return c.refused(msgHeld)
	case errors.Is(err, nacoslock.ErrReentry):
		return c.refused(err.Error())
	}
	return err
}

// msgHeld is the server's text for a refusal, which scripts may match.
const msgHeld = "Lock is held by another owner"

func (c *ctl) granted(m *nacoslock.Mutex) error {
	_, count := m.Held()
	if c.json {
		fmt.Fprintf(c.out, `{"result":true,"reentrantCount":%d,"waitPosition":-1,"fencingToken":%d,"message":""}`+"\n", count, m.FencingToken())
		return nil
	}
	fmt.Fprintf(c.out, "granted (reentrant count %d, fencing token %d)\n", count, m.FencingToken())
	return nil
}

func (c *ctl) refused(why string) error {
	if c.json {
		fmt.Fprintf(c.out, `{"result":false,"reentrantCount":0,"waitPosition":-1,"fencingToken":0,"message":%q}`+"\n", why)
	} else {
		fmt.Fprintf(c.out, "not granted: %s\n", why)
	}
	return exitCode(3)
}

func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func (c *ctl) dial(ctx context.Context) (*client.Client, error) {
	host, port, err := net.SplitHostPort(c.server)
	if err != nil {
		return nil, fmt.Errorf("--server %q: %w", c.server, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return nil, fmt.Errorf("--server %q: bad port", c.server)
	}
	dctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	opts := []client.Option{client.WithClientVersion("nacos-lockctl")}
	if c.token != "" {
		opts = append(opts, client.WithHeaders(map[string]string{"accessToken": c.token}))
	}
	cl, err := client.Dial(dctx, net.JoinHostPort(host, strconv.Itoa(p+1000)), opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", c.server, err)
	}
	return cl, nil
}

func (c *ctl) call(ctx context.Context, cl *client.Client, op protocol.LockOp, li protocol.LockInstance) (*protocol.LockOperationResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	r, err := cl.Lock(ctx, op, li)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if r.ResultCode != 200 {
		return nil, fmt.Errorf("%s: %s", op, r.Message)
	}
	return r, nil
}

// runHeld runs the command while the lock is held and stops it (SIGTERM)
// when the lock is lost, so that it does not go on unprotected.
func runHeld(ctx context.Context, m *nacoslock.Mutex, command []string, key string, token uint64) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-m.Lost():
			cancel()
		case <-ctx.Done():
		}
	}()
	cmd := exec.CommandContext(ctx, command[0], command[1:]...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), "NACOS_LOCK_KEY="+key, "NACOS_LOCK_FENCING_TOKEN="+strconv.FormatUint(token, 10))
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return exitCode(ee.ExitCode())
	}
	return err
}

func (c *ctl) report(r *protocol.LockOperationResponse, yes, no string) error {
	lr := result(r)
	if c.json {
		fmt.Fprintf(c.out, `{"result":%t,"reentrantCount":%d,"waitPosition":%d,"fencingToken":%d,"message":%q}`+"\n",
			r.Result, lr.ReentrantCount, lr.WaitPosition, lr.FencingToken, lr.ErrorMessage)
	} else if r.Result {
		fmt.Fprintf(c.out, "%s (reentrant count %d, fencing token %d)\n", yes, lr.ReentrantCount, lr.FencingToken)
	} else {
		why := lr.ErrorMessage
		if lr.WaitPosition >= 0 {
			why = "queued at position " + strconv.Itoa(lr.WaitPosition)
		}
		fmt.Fprintf(c.out, "%s: %s\n", no, why)
	}
	if !r.Result {
		return exitCode(3)
	}
	return nil
}

// result is the reply's lockResult, or what a boolean-only reply (RENEW)
// implies.
func result(r *protocol.LockOperationResponse) protocol.LockResult {
	if r.LockResult != nil {
		return *r.LockResult
	}
	return protocol.LockResult{Success: r.Result, WaitPosition: protocol.NoWaitPosition}
}
