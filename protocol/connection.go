package protocol

// Connection-level messages: handshake, health, server pushes that manage
// the connection, and the types the SDK registers but a lock client never
// exchanges. Their derived module is "internal".
//
// Each MarshalJSON converts to a local type without methods, so encoding/json
// does not recurse, then appends the derived property Jackson would write.

// ServerCheckRequest is the first unary call on a new channel; it is answered
// even before the connection is registered.
type ServerCheckRequest struct {
	RequestBase
}

// ServerCheckResponse must say SupportAbilityNegotiation, or the client never
// waits for SetupAckRequest and runs without the "lock" ability.
type ServerCheckResponse struct {
	ResponseBase
	ConnectionID              string `json:"connectionId,omitempty"`
	SupportAbilityNegotiation bool   `json:"supportAbilityNegotiation"`
}

// HealthCheckRequest is the client's keepalive on an idle connection.
type HealthCheckRequest struct {
	RequestBase
}

// HealthCheckResponse answers HealthCheckRequest; any non-200 marks the
// connection unhealthy.
type HealthCheckResponse struct {
	ResponseBase
}

// ConnectionSetupRequest is the first message on the bi-stream; the server
// registers the connection from it.
type ConnectionSetupRequest struct {
	RequestBase
	ClientVersion string            `json:"clientVersion,omitempty"`
	Labels        map[string]string `json:"labels"` // Java initialises it, so never null on the wire
	AbilityTable  map[string]bool   `json:"abilityTable,omitempty"`
	Tenant        string            `json:"tenant,omitempty"`
}

// SetupAckRequest is pushed once after registration, without requestId, and
// gets no reply. AbilityTable must hold "lock": true.
type SetupAckRequest struct {
	RequestBase
	AbilityTable map[string]bool `json:"abilityTable"` // {} rather than absent when nil
}

// SetupAckResponse exists in the SDK but is never sent.
type SetupAckResponse struct {
	ResponseBase
}

// ClientDetectionRequest is the server's liveness probe.
type ClientDetectionRequest struct {
	RequestBase
}

// ClientDetectionResponse is the client's answer to ClientDetectionRequest.
type ClientDetectionResponse struct {
	ResponseBase
}

// ConnectResetRequest asks the client to move to another server.
// ServerPort is the main (HTTP) port as a string; the client adds the gRPC
// offset.
type ConnectResetRequest struct {
	RequestBase
	ServerIP     string `json:"serverIp,omitempty"`
	ServerPort   string `json:"serverPort,omitempty"`
	ConnectionID string `json:"connectionId,omitempty"`
}

// ConnectResetResponse is sent before the client actually switches.
type ConnectResetResponse struct {
	ResponseBase
}

// ErrorResponse is for transport-level problems only (unregistered
// connection, unknown type, unparseable request). The client retries a
// request answered this way, so lock failures are never ErrorResponses.
type ErrorResponse struct {
	ResponseBase
}

// ServerLoaderInfoRequest is registered by the SDK but not used by the lock
// client.
type ServerLoaderInfoRequest struct {
	RequestBase
}

// ServerLoaderInfoResponse is registered by the SDK but not used by the lock
// client.
type ServerLoaderInfoResponse struct {
	ResponseBase
	Address       string            `json:"address,omitempty"`
	LoaderMetrics map[string]string `json:"loaderMetrics"` // Java initialises it
}

// ServerReloadRequest is registered by the SDK but not used by the lock
// client.
type ServerReloadRequest struct {
	RequestBase
	ReloadCount  int    `json:"reloadCount"`
	ReloadServer string `json:"reloadServer,omitempty"`
}

// ServerReloadResponse is registered by the SDK but not used by the lock
// client.
type ServerReloadResponse struct {
	ResponseBase
}

// PushAckRequest is registered by the SDK but not used by the lock client.
// Java's class also has an exception object, which is ignored on read.
type PushAckRequest struct {
	RequestBase
	Success bool `json:"success"`
}

func (ServerCheckRequest) TypeName() string       { return "ServerCheckRequest" }
func (ServerCheckResponse) TypeName() string      { return "ServerCheckResponse" }
func (HealthCheckRequest) TypeName() string       { return "HealthCheckRequest" }
func (HealthCheckResponse) TypeName() string      { return "HealthCheckResponse" }
func (ConnectionSetupRequest) TypeName() string   { return "ConnectionSetupRequest" }
func (SetupAckRequest) TypeName() string          { return "SetupAckRequest" }
func (SetupAckResponse) TypeName() string         { return "SetupAckResponse" }
func (ClientDetectionRequest) TypeName() string   { return "ClientDetectionRequest" }
func (ClientDetectionResponse) TypeName() string  { return "ClientDetectionResponse" }
func (ConnectResetRequest) TypeName() string      { return "ConnectResetRequest" }
func (ConnectResetResponse) TypeName() string     { return "ConnectResetResponse" }
func (ErrorResponse) TypeName() string            { return "ErrorResponse" }
func (ServerLoaderInfoRequest) TypeName() string  { return "ServerLoaderInfoRequest" }
func (ServerLoaderInfoResponse) TypeName() string { return "ServerLoaderInfoResponse" }
func (ServerReloadRequest) TypeName() string      { return "ServerReloadRequest" }
func (ServerReloadResponse) TypeName() string     { return "ServerReloadResponse" }
func (PushAckRequest) TypeName() string           { return "PushAckRequest" }

func (r ServerCheckRequest) MarshalJSON() ([]byte, error) {
	type wire ServerCheckRequest
	r.RequestBase = r.forWire()
	return marshalWith(wire(r), "module", moduleInternal)
}

func (r ServerCheckResponse) MarshalJSON() ([]byte, error) {
	type wire ServerCheckResponse
	return marshalWith(wire(r), "success", r.OK())
}

func (r HealthCheckRequest) MarshalJSON() ([]byte, error) {
	type wire HealthCheckRequest
	r.RequestBase = r.forWire()
	return marshalWith(wire(r), "module", moduleInternal)
}

func (r HealthCheckResponse) MarshalJSON() ([]byte, error) {
	type wire HealthCheckResponse
	return marshalWith(wire(r), "success", r.OK())
}

func (r ConnectionSetupRequest) MarshalJSON() ([]byte, error) {
	type wire ConnectionSetupRequest
	r.RequestBase = r.forWire()
	if r.Labels == nil {
		r.Labels = map[string]string{}
	}
	return marshalWith(wire(r), "module", moduleInternal)
}

func (r SetupAckRequest) MarshalJSON() ([]byte, error) {
	type wire SetupAckRequest
	r.RequestBase = r.forWire()
	if r.AbilityTable == nil {
		r.AbilityTable = map[string]bool{}
	}
	return marshalWith(wire(r), "module", moduleInternal)
}

func (r SetupAckResponse) MarshalJSON() ([]byte, error) {
	type wire SetupAckResponse
	return marshalWith(wire(r), "success", r.OK())
}

func (r ClientDetectionRequest) MarshalJSON() ([]byte, error) {
	type wire ClientDetectionRequest
	r.RequestBase = r.forWire()
	return marshalWith(wire(r), "module", moduleInternal)
}

func (r ClientDetectionResponse) MarshalJSON() ([]byte, error) {
	type wire ClientDetectionResponse
	return marshalWith(wire(r), "success", r.OK())
}

func (r ConnectResetRequest) MarshalJSON() ([]byte, error) {
	type wire ConnectResetRequest
	r.RequestBase = r.forWire()
	return marshalWith(wire(r), "module", moduleInternal)
}

func (r ConnectResetResponse) MarshalJSON() ([]byte, error) {
	type wire ConnectResetResponse
	return marshalWith(wire(r), "success", r.OK())
}

func (r ErrorResponse) MarshalJSON() ([]byte, error) {
	type wire ErrorResponse
	return marshalWith(wire(r), "success", r.OK())
}

func (r ServerLoaderInfoRequest) MarshalJSON() ([]byte, error) {
	type wire ServerLoaderInfoRequest
	r.RequestBase = r.forWire()
	return marshalWith(wire(r), "module", moduleInternal)
}

func (r ServerLoaderInfoResponse) MarshalJSON() ([]byte, error) {
	type wire ServerLoaderInfoResponse
	if r.LoaderMetrics == nil {
		r.LoaderMetrics = map[string]string{}
	}
	return marshalWith(wire(r), "success", r.OK())
}

func (r ServerReloadRequest) MarshalJSON() ([]byte, error) {
	type wire ServerReloadRequest
	r.RequestBase = r.forWire()
	return marshalWith(wire(r), "module", moduleInternal)
}

func (r ServerReloadResponse) MarshalJSON() ([]byte, error) {
	type wire ServerReloadResponse
	return marshalWith(wire(r), "success", r.OK())
}

func (r PushAckRequest) MarshalJSON() ([]byte, error) {
	type wire PushAckRequest
	r.RequestBase = r.forWire()
	return marshalWith(wire(r), "module", moduleInternal)
}
