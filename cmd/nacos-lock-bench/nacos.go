package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"nacos-lockd/bench/load"
	"nacos-lockd/interop/client"
	"nacos-lockd/protocol"
)

// nacosLocker is one Nacos connection speaking the real lock protocol, the
// way a 3.3 Java client does: ACQUIRE (with waitTimeMs when it may wait),
// then on a queued answer wait for the server's LockNotificationRequest
// push and claim the grant with waiterRetry.
type nacosLocker struct {
	c      *client.Client
	owner  string
	lease  int64 // ms
	waitMs int64 // how long a waiter may stay queued; longer than any run
}

func dialNacos(grpcAddr string, lease int64) load.Dialer {
	return dialNacosAll([]string{grpcAddr}, lease)
}

// dialNacosAll spreads the clients over several nodes' SDK addresses:
// client i connects to grpcAddrs[i mod len].
func dialNacosAll(grpcAddrs []string, lease int64) load.Dialer {
	return func(ctx context.Context, i int) (load.Locker, error) {
		c, err := client.Dial(ctx, grpcAddrs[i%len(grpcAddrs)], client.WithClientVersion("nacos-lock-bench"))
		if err != nil {
			return nil, err
		}
		return &nacosLocker{c: c, owner: fmt.Sprintf("bench-%d-%d", i, time.Now().UnixNano()), lease: lease, waitMs: 20 * 60 * 1000}, nil
	}
}

var errRefused = errors.New("refused without queueing")

func (n *nacosLocker) instance(key string, lease int64, wait bool) protocol.LockInstance {
	var w *int64
	if wait {
		w = client.Ms(n.waitMs)
	}
	return client.Instance(key, "NON_REENTRANT", n.owner, client.Ms(lease), w)
}

func (n *nacosLocker) Acquire(ctx context.Context, key string, wait bool) (load.Grant, error) {
	return n.acquire(ctx, key, n.lease, wait)
}

func (n *nacosLocker) acquire(ctx context.Context, key string, lease int64, wait bool) (load.Grant, error) {
	li := n.instance(key, lease, wait)
	sent := time.Now()
	r, err := n.c.Lock(ctx, protocol.OpAcquire, li)
	replied := time.Now()
	if err != nil {
		return load.Grant{}, err
	}
	if r.ResultCode != 200 {
		return load.Grant{}, fmt.Errorf("resultCode %d: %s", r.ResultCode, r.Message)
	}
	if r.Result {
		return load.Grant{Sent: sent, Replied: replied, Token: token(r), HasToken: true}, nil
	}
	if !wait {
		return load.Grant{}, load.ErrHeld
	}
	if r.LockResult == nil || r.LockResult.WaitPosition < 0 {
		return load.Grant{}, fmt.Errorf("%w: %+v", errRefused, r.LockResult)
	}
	for {
		p, err := client.WaitPush[*protocol.LockNotificationRequest](ctx, n.c)
		if err != nil {
			return load.Grant{}, fmt.Errorf("wait for hand-off push: %w", err)
		}
		if p.LockKey == key && p.Owner == n.owner {
			break
		}
	}
	li.WaiterRetry = true
	r, err = n.c.Lock(ctx, protocol.OpAcquire, li)
	if err != nil {
		return load.Grant{}, fmt.Errorf("claim: %w", err)
	}
	if r.ResultCode != 200 || !r.Result {
		return load.Grant{}, fmt.Errorf("claim refused: code %d %s %+v", r.ResultCode, r.Message, r.LockResult)
	}
	return load.Grant{Sent: sent, Replied: replied, Token: token(r), HasToken: true}, nil
}

func token(r *protocol.LockOperationResponse) uint64 {
	if r.LockResult == nil {
		return 0
	}
	return r.LockResult.FencingToken
}

func (n *nacosLocker) Release(ctx context.Context, key string) error {
	li := client.Instance(key, "NON_REENTRANT", n.owner, client.Ms(0), nil)
	r, err := n.c.Lock(ctx, protocol.OpRelease, li)
	if err != nil {
		return err
	}
	if r.ResultCode != 200 || !r.Result {
		return fmt.Errorf("release refused: code %d %s %+v", r.ResultCode, r.Message, r.LockResult)
	}
	return nil
}

// renew extends a held lock's lease, as the 3.3 client's watchdog does.
func (n *nacosLocker) renew(ctx context.Context, key string, lease int64) error {
	r, err := n.c.Lock(ctx, protocol.OpRenew, n.instance(key, lease, false))
	if err != nil {
		return err
	}
	if r.ResultCode != 200 || !r.Result {
		return fmt.Errorf("renew refused: code %d %s", r.ResultCode, r.Message)
	}
	return nil
}

func (n *nacosLocker) Close() error { return n.c.Close() }
