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
	"time"

	"nacos-lockd/interop/client"
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
	cl, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	li := client.Instance(key, f.typ, f.owner, client.Ms(f.lease), client.Ms(f.wait))
	switch cmd {
	case "unlock":
		li.ExpiredTime = client.Ms(0)
		r, err := c.call(ctx, cl, protocol.OpRelease, li)
		if err != nil {
			return err
		}
		return c.report(r, "released", "not released")
	case "renew":
		r, err := c.call(ctx, cl, protocol.OpRenew, li)
		if err != nil {
			return err
		}
		return c.report(r, "renewed", "not renewed")
	case "try":
		r, err := c.acquire(ctx, cl, li)
		if err != nil {
			return err
		}
		if r.Result {
			// The connection closes as the CLI exits, and the server frees a
			// closed connection's locks: say so, or a user expects to hold it.
			fmt.Fprintf(c.errOut, "%s is released as nacos-lockctl exits; to keep it, use lock or hold\n", key)
		}
		return c.report(r, "granted", "not granted")
	}
	r, err := c.acquire(ctx, cl, li)
	if err != nil {
		return err
	}
	if !r.Result {
		return c.report(r, "granted", "not granted")
	}
	token := result(r).FencingToken
	renewCtx, stopRenew := context.WithCancel(ctx)
	renewDone := make(chan error, 1)
	go func() { renewDone <- c.renewLoop(renewCtx, cl, li) }()
	var runErr error
	if cmd == "hold" {
		fmt.Fprintf(c.errOut, "holding %s (fencing token %d)\n", key, token)
		runErr = runHeld(ctx, command, key, token)
	} else {
		fmt.Fprintf(c.out, "holding %s (fencing token %d); interrupt to release\n", key, token)
		<-ctx.Done()
	}
	stopRenew()
	lost := <-renewDone
	rel := li
	rel.ExpiredTime = client.Ms(0)
	relCtx, cancel := context.WithTimeout(context.Background(), c.timeout)
	_, relErr := c.call(relCtx, cl, protocol.OpRelease, rel)
	cancel()
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

// acquire sends ACQUIRE and, when queued, waits for the server's push
// and claims the grant, like the Java client's lock().
func (c *ctl) acquire(ctx context.Context, cl *client.Client, li protocol.LockInstance) (*protocol.LockOperationResponse, error) {
	deadline := time.Now().Add(time.Duration(max(li.WaitMs(), 0)) * time.Millisecond)
	for {
		r, err := c.call(ctx, cl, protocol.OpAcquire, li)
		if err != nil || r.Result || li.WaitMs() <= 0 {
			return r, err
		}
		remaining := time.Until(deadline)
		if remaining <= 0 {
			cancelWait(cl, li, c.timeout)
			return r, nil
		}
		wctx, cancel := context.WithTimeout(ctx, min(remaining, 2*time.Second))
		_, _ = client.WaitPush[*protocol.LockNotificationRequest](wctx, cl) // or poll again
		cancel()
		if ctx.Err() != nil {
			cancelWait(cl, li, c.timeout)
			return nil, ctx.Err()
		}
		li.WaiterRetry = true
	}
}

func cancelWait(cl *client.Client, li protocol.LockInstance, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_, _ = cl.Lock(ctx, protocol.OpCancelWait, li)
}

// renewLoop renews every third of the lease until ctx ends; it returns an
// error if the lock was lost.
func (c *ctl) renewLoop(ctx context.Context, cl *client.Client, li protocol.LockInstance) error {
	every := time.Duration(max(*li.ExpiredTime/3, 100)) * time.Millisecond
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		r, err := c.call(ctx, cl, protocol.OpRenew, li)
		if ctx.Err() != nil {
			return nil
		}
		if err == nil && !r.Result {
			return errors.New("the server refused the renewal")
		}
	}
}

func runHeld(ctx context.Context, command []string, key string, token uint64) error {
	cmd := exec.CommandContext(ctx, command[0], command[1:]...)
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
