package h2grpc

import (
	"fmt"
	"strings"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// requestHeaders are what we keep of a request's header block: the fields
// we use, and whether the block is well-formed.
type requestHeaders struct {
	id        uint32
	endStream bool
	trailers  bool   // on a stream already open: the request's trailers
	frames    int    // HEADERS and CONTINUATION frames of the block
	encoded   int    // bytes of the block as sent
	size      uint32 // decoded size as HTTP/2 counts it (name + value + 32 per field)
	truncated bool   // over MaxHeaderListSize: the call is refused
	// malformed says why the block breaks RFC 9113 section 8.2-8.3 ("" if it does
	// not): the stream is reset with PROTOCOL_ERROR.
	malformed string
	pseudo    uint8  // the pseudo-header fields seen (pseudo* bits)
	regular   bool   // a regular field seen: no pseudo-header field may follow
	badBin    string // a -bin field whose value is not base64
	md        mdFields

	method, path, ctype, timeout, encoding string
}

// The request pseudo-header fields (RFC 9113 section 8.3.1).
const (
	pseudoMethod uint8 = 1 << iota
	pseudoScheme
	pseudoPath
	pseudoAuthority
)

// maxHeaderFrames bounds the frames of one header block: HTTP/2 frames
// carry at least 16 KiB, so a block within any sane limit needs a few; a
// flood of (empty) CONTINUATION frames is closed early.
const maxHeaderFrames = 64

// onHeaderFragment decodes a piece of a header block as it arrives and,
// at its end, opens the stream.
func (c *conn) onHeaderFragment(frag []byte, ended bool) error {
	h := &c.hdr
	h.frames++
	h.encoded += len(frag)
	// Far over the limit (HPACK compresses, but not below half for the
	// fields a flood would send) or too many frames: not worth decoding.
	if h.frames > maxHeaderFrames || h.encoded > 2*int(c.s.cfg.MaxHeaderListSize) {
		return &connError{http2.ErrCodeEnhanceYourCalm, fmt.Sprintf("header block too large (%d frames, %d bytes)", h.frames, h.encoded)}
	}
	if _, err := c.hdec.Write(frag); err != nil {
		return &connError{http2.ErrCodeCompression, "header block not decodable: " + err.Error()}
	}
	if !ended {
		return nil
	}
	if err := c.hdec.Close(); err != nil {
		return &connError{http2.ErrCodeCompression, "header block not decodable: " + err.Error()}
	}
	return c.onHeaders(h)
}

// emitHeader checks each field as it is decoded and keeps the ones we
// use. Past the size limit, or once the block is known to be malformed,
// it keeps none; HPACK is still decoded to the end, as its table must
// stay in step with the client's.
func (c *conn) emitHeader(hf hpack.HeaderField) {
	h := &c.hdr
	if h.truncated {
		return
	}
	if h.size += hf.Size(); h.size > c.s.cfg.MaxHeaderListSize {
		h.truncated = true
		return
	}
	if h.malformed != "" {
		return
	}
	if !validFieldValue(hf.Value) {
		h.malformed = fmt.Sprintf("field %.64q: value with NUL, CR or LF, or leading or trailing whitespace", hf.Name)
		return
	}
	if len(hf.Name) > 0 && hf.Name[0] == ':' {
		h.pseudoField(hf)
		return
	}
	h.regular = true
	if why := fieldNameProblem(hf.Name); why != "" {
		h.malformed = fmt.Sprintf("field name %.64q: %s", hf.Name, why)
		return
	}
	switch hf.Name {
	case "content-type":
		h.ctype = hf.Value
	case "grpc-timeout":
		h.timeout = hf.Value
	case "grpc-encoding":
		h.encoding = hf.Value
	case "te":
		// The one connection-specific field allowed, with one value.
		if hf.Value != "trailers" {
			h.malformed = fmt.Sprintf("te %.64q: only \"trailers\" is allowed", hf.Value)
		}
	case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade":
		h.malformed = "connection-specific field " + hf.Name
		return
	}
	if h.trailers || !inMetadata(hf.Name) {
		return
	}
	if strings.HasSuffix(hf.Name, "-bin") && !validBinValue(hf.Value) && h.badBin == "" {
		h.badBin = hf.Name
	}
	h.md.add(hf.Name, hf.Value)
}

// pseudoField takes a field whose name starts with a colon.
func (h *requestHeaders) pseudoField(hf hpack.HeaderField) {
	if h.trailers {
		h.malformed = fmt.Sprintf("pseudo-header field %.64q in trailers", hf.Name)
		return
	}
	if h.regular {
		h.malformed = fmt.Sprintf("pseudo-header field %.64q after a regular field", hf.Name)
		return
	}
	var bit uint8
	switch hf.Name {
	case ":method":
		bit = pseudoMethod
		h.method = hf.Value
	case ":scheme":
		bit = pseudoScheme
	case ":path":
		bit = pseudoPath
		h.path = hf.Value
		if hf.Value == "" {
			h.malformed = "empty :path"
			return
		}
	case ":authority":
		bit = pseudoAuthority
		h.md.add(hf.Name, hf.Value)
	default:
		// :status is a response's; :protocol needs extended CONNECT, which
		// we do not offer.
		h.malformed = fmt.Sprintf("pseudo-header field %.64q is not a request's", hf.Name)
		return
	}
	if h.pseudo&bit != 0 {
		h.malformed = "duplicate pseudo-header field " + hf.Name
		return
	}
	h.pseudo |= bit
}

// checkComplete checks, at the end of a request's block, that it has the
// pseudo-header fields every request needs. CONNECT has no :scheme and
// :path; it is refused later, as every method but POST is.
func (h *requestHeaders) checkComplete() {
	if h.malformed != "" || h.truncated || h.trailers {
		return
	}
	const need = pseudoMethod | pseudoScheme | pseudoPath
	if h.pseudo&pseudoMethod == 0 || (h.method != "CONNECT" && h.pseudo&need != need) {
		h.malformed = "missing :method, :scheme or :path"
	}
}

// fieldNameProblem says what is wrong with a regular field's name, ""
// if nothing: RFC 9113 section 8.2.1 and section 8.2 (lowercase only).
func fieldNameProblem(name string) string {
	if name == "" {
		return "empty"
	}
	for i := 0; i < len(name); i++ {
		switch b := name[i]; {
		case 'A' <= b && b <= 'Z':
			return "uppercase"
		case b <= ' ' || b >= 0x7f || b == ':':
			return "character not allowed"
		}
	}
	return ""
}

// validFieldValue: no NUL, CR or LF anywhere, no leading or trailing
// space or tab (RFC 9113 section 8.2.1).
func validFieldValue(v string) bool {
	if v == "" {
		return true
	}
	if isSpaceOrTab(v[0]) || isSpaceOrTab(v[len(v)-1]) {
		return false
	}
	for i := 0; i < len(v); i++ {
		if b := v[i]; b == 0 || b == '\n' || b == '\r' {
			return false
		}
	}
	return true
}

func isSpaceOrTab(b byte) bool { return b == ' ' || b == '\t' }
