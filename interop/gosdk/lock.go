// Package gosdk drives nacos-lockd through the Nacos Go SDK's own RPC client
// (github.com/nacos-group/nacos-sdk-go/v2, common/remote/rpc): its gRPC
// transport, ServerCheck, ConnectionSetupRequest, health checks, server
// switching on ConnectResetRequest and reconnects. The SDK has no lock API,
// so this package adds the lock message types its request/response
// interfaces need and registers the response type with the SDK.
//
// It is its own Go module on purpose: nacos-sdk-go registers an unpackaged
// protobuf "Payload"/"Metadata" from a file named nacos_grpc_service.proto,
// exactly like nacos-lockd/protocol/pb, so the two cannot be linked into one
// binary. Nothing here imports nacos-lockd; the wire shapes are written out
// from the Java client's classes (see docs/wire-protocol.md §6).
package gosdk

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"github.com/nacos-group/nacos-sdk-go/v2/common/http_agent"
	"github.com/nacos-group/nacos-sdk-go/v2/common/nacos_server"
	"github.com/nacos-group/nacos-sdk-go/v2/common/remote/rpc"
	"github.com/nacos-group/nacos-sdk-go/v2/common/remote/rpc/rpc_request"
	"github.com/nacos-group/nacos-sdk-go/v2/common/remote/rpc/rpc_response"
	"github.com/nacos-group/nacos-sdk-go/v2/inner/uuid"
)

// LockInstance is com.alibaba.nacos.api.lock.model.LockInstance (Gen 1
// fields). Nil pointers are omitted, like the Java client's NON_NULL Jackson.
type LockInstance struct {
	Key         *string           `json:"key,omitempty"`
	ExpiredTime *int64            `json:"expiredTime,omitempty"`
	LockType    *string           `json:"lockType,omitempty"`
	Params      map[string]string `json:"params,omitempty"`
}

// Instance builds a LockInstance; an empty lockType is omitted.
func Instance(key string, expiredTime int64, lockType string) *LockInstance {
	li := &LockInstance{Key: &key, ExpiredTime: &expiredTime}
	if lockType != "" {
		li.LockType = &lockType
	}
	return li
}

// LockOperationRequest implements the SDK's rpc_request.IRequest.
type LockOperationRequest struct {
	*rpc_request.Request
	Module            string        `json:"module"`
	LockInstance      *LockInstance `json:"lockInstance,omitempty"`
	LockOperationEnum string        `json:"lockOperationEnum,omitempty"`
}

// GetRequestType is metadata.type.
func (r *LockOperationRequest) GetRequestType() string { return "LockOperationRequest" }

// NewLockOperationRequest builds a request as the Java client does.
func NewLockOperationRequest(op string, li *LockInstance) *LockOperationRequest {
	return &LockOperationRequest{
		Request:           &rpc_request.Request{Headers: map[string]string{"app": "nacos-lockd-gosdk"}},
		Module:            "lock",
		LockInstance:      li,
		LockOperationEnum: op,
	}
}

// LockResult is the 3.3-line lockResult, plus nacos-lockd's fencingToken.
type LockResult struct {
	Success        bool   `json:"success"`
	ReentrantCount int    `json:"reentrantCount"`
	WaitPosition   int    `json:"waitPosition"`
	ErrorMessage   string `json:"errorMessage,omitempty"`
	FencingToken   *int64 `json:"fencingToken,omitempty"`
}

// LockOperationResponse implements the SDK's rpc_response.IResponse.
type LockOperationResponse struct {
	*rpc_response.Response
	Result     *bool       `json:"result"`
	LockResult *LockResult `json:"lockResult"`
}

// GetResponseType is metadata.type.
func (r *LockOperationResponse) GetResponseType() string { return "LockOperationResponse" }

// Granted is result == true.
func (r *LockOperationResponse) Granted() bool { return r.Result != nil && *r.Result }

func (r *LockOperationResponse) String() string {
	res := "null"
	if r.Result != nil {
		res = fmt.Sprint(*r.Result)
	}
	lr := "null"
	if r.LockResult != nil {
		lr = fmt.Sprintf("%+v", *r.LockResult)
		if r.LockResult.FencingToken != nil {
			lr = fmt.Sprintf("%s(fencingToken=%d)", lr, *r.LockResult.FencingToken)
		}
	}
	return fmt.Sprintf("resultCode=%d errorCode=%d message=%q result=%s lockResult=%s",
		r.GetResultCode(), r.GetErrorCode(), r.GetMessage(), res, lr)
}

var registerOnce sync.Once

// register adds LockOperationResponse to the SDK's response registry (an
// exported map the SDK reads when it decodes a unary reply).
func register() {
	registerOnce.Do(func() {
		rpc_response.ClientResponseMapping["LockOperationResponse"] = func() rpc_response.IResponse {
			return &LockOperationResponse{Response: &rpc_response.Response{}}
		}
	})
}

// Server is one entry of the SDK's server list.
type Server struct {
	IP   string
	Port uint64 // main port; the SDK dials Port+1000
}

// Client is one SDK RPC client (one connection at a time, its own lock owner).
type Client struct {
	Name      string
	rpc       *rpc.RpcClient
	cancel    context.CancelFunc
	timeoutMs int64
}

// Dial builds an SDK RPC client the way the SDK's naming client does
// (nacos_server.NewNacosServer + rpc.CreateClient + Start) with labels
// source=sdk, module=lock, and waits until it is RUNNING.
func Dial(servers []Server, wait time.Duration) (*Client, error) {
	register()
	ctx, cancel := context.WithCancel(context.Background())
	cfgs := make([]constant.ServerConfig, 0, len(servers))
	for _, s := range servers {
		cfgs = append(cfgs, constant.ServerConfig{IpAddr: s.IP, Port: s.Port, GrpcPort: s.Port + constant.RpcPortOffset})
	}
	clientCfg := constant.ClientConfig{TimeoutMs: 5000}
	ns, err := nacos_server.NewNacosServer(ctx, cfgs, clientCfg, &http_agent.HttpAgent{}, clientCfg.TimeoutMs, "", nil)
	if err != nil {
		cancel()
		return nil, err
	}
	id, err := uuid.NewV4()
	if err != nil {
		cancel()
		return nil, err
	}
	labels := map[string]string{constant.LABEL_SOURCE: constant.LABEL_SOURCE_SDK, constant.LABEL_MODULE: "lock"}
	irpc, err := rpc.CreateClient(ctx, "lock-"+id.String(), rpc.GRPC, labels, ns, &clientCfg.TLSCfg, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	c := &Client{Name: "lock-" + id.String(), rpc: irpc.GetRpcClient(), cancel: cancel, timeoutMs: 5000}
	c.rpc.Start()
	deadline := time.Now().Add(wait)
	for !c.rpc.IsRunning() {
		if time.Now().After(deadline) {
			c.Close()
			return nil, errors.New("the SDK RPC client did not reach RUNNING")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return c, nil
}

// Running reports the SDK client's status.
func (c *Client) Running() bool { return c.rpc.IsRunning() }

// Do sends one LockOperationRequest through the SDK's RpcClient.Request
// (with its retries) and returns the decoded reply.
func (c *Client) Do(op string, li *LockInstance) (*LockOperationResponse, error) {
	resp, err := c.rpc.Request(NewLockOperationRequest(op, li), c.timeoutMs)
	if err != nil {
		return nil, err
	}
	r, ok := resp.(*LockOperationResponse)
	if !ok {
		return nil, fmt.Errorf("reply is %s, not LockOperationResponse: %s", resp.GetResponseType(), resp.GetBody())
	}
	return r, nil
}

// Acquire sends ACQUIRE for a NACOS_LOCK (the Gen 1 shape).
func (c *Client) Acquire(key string, leaseMs int64) (*LockOperationResponse, error) {
	return c.Do("ACQUIRE", Instance(key, leaseMs, "NACOS_LOCK"))
}

// Release sends RELEASE for a NACOS_LOCK.
func (c *Client) Release(key string) (*LockOperationResponse, error) {
	return c.Do("RELEASE", Instance(key, -1, "NACOS_LOCK"))
}

// Close shuts the SDK client down (closes its connection) and stops its
// goroutines.
func (c *Client) Close() {
	c.rpc.Shutdown()
	c.cancel()
}
