// Package execclient is a small client of the mount pod's exec service
// (internal/pod/execserver) that does not link gRPC or the protobuf runtime: it
// speaks the service's gRPC protocol over HTTP/2 itself (frames by hand,
// headers with hpack, messages with protowire). kubelet-exec-shim uses it
// so that the whole shim process stays as small as its host fallback on
// the live path; everything else uses pkg/execclient's Client.
//
// It is deliberately narrow: one connection per process, calls one after
// the other (Identity, then Exec), prior-knowledge HTTP/2 on a unix socket,
// no compression, no retries. Flow control is honoured both ways: what the
// service sends is granted back as it is consumed, and standard input waits
// for the service's window.
package execclient

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"golang.org/x/net/http2/hpack"

	"github.com/mountcontainers/mountcontainers/internal/boundary/execsocket"
)

// HTTP/2 frame types and flags (RFC 9113, section 6).
const (
	frameData         = 0x0
	frameHeaders      = 0x1
	frameRSTStream    = 0x3
	frameSettings     = 0x4
	framePushPromise  = 0x5
	framePing         = 0x6
	frameGoAway       = 0x7
	frameWindowUpdate = 0x8
	frameContinuation = 0x9

	flagEndStream  = 0x1
	flagAck        = 0x1
	flagEndHeaders = 0x4
	flagPadded     = 0x8
	flagPriority   = 0x20

	settingInitialWindowSize = 0x4
	settingMaxFrameSize      = 0x5

	errCodeCancel = 0x8

	// maxFrame is the largest frame this client accepts (it advertises the
	// protocol's default) and sends.
	maxFrame = 16384
	// defaultWindow is the protocol's initial flow-control window.
	defaultWindow = 65535
	// recvWindow is the window this client grants each stream and the
	// connection: what the service may send ahead of the consumer.
	recvWindow = 1 << 20
	// maxMessage bounds one gRPC message from the service; the service
	// sends output in chunks of at most 32 KiB.
	maxMessage = 4 << 20
	// maxHeaderBlock bounds a header block (headers or trailers).
	maxHeaderBlock = 64 << 10
)

// gRPC status codes this client tells apart.
const (
	codeOK                 = 0
	codeCanceled           = 1
	codeResourceExhausted  = 8
	codeFailedPrecondition = 9
	codeUnavailable        = 14
)

// ErrNotStarted is wrapped by an error after which the command certainly
// did not start: the service could not be reached, is busy, or serves
// another pod than expected. The caller may place the command elsewhere.
var ErrNotStarted = errors.New("exec service unusable, command not started")

// StatusError is a call that ended with a gRPC status other than OK.
type StatusError struct {
	Code    int
	Message string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("rpc error: code = %d desc = %s", e.Code, e.Message)
}

// Conn is a connection to an exec service.
type Conn struct {
	path    string
	nc      net.Conn
	peerPID int

	wmu  sync.Mutex // frame writes
	bw   *bufio.Writer
	henc *hpack.Encoder
	hbuf bytes.Buffer

	mu        sync.Mutex
	cond      *sync.Cond
	nextID    uint32
	streams   map[uint32]*stream
	sendConn  int64 // the service's connection window
	initWin   int64 // the service's initial stream window
	maxSend   int   // the service's largest frame
	goAway    uint32
	gotGoAway bool
	err       error // the connection's end
	done      chan struct{}
}

// stream is one call.
type stream struct {
	id      uint32
	sendWin int64
	in      chan event    // to the caller, in order
	gone    chan struct{} // closed when the caller gave the call up
	ended   bool          // the service's side is closed
	buf     []byte        // a partial gRPC message
}

// event is a message or the end of a call.
type event struct {
	msg []byte
	n   int // flow-control bytes to grant back once consumed
	end *callEnd
}

// callEnd is how a call ended.
type callEnd struct {
	status  int
	message string
	err     error // a transport error instead of a status
}

// Dial connects to the exec service at path (checked by the caller with
// execsocket.CheckSocket) and refuses a service not run by root or the
// caller's own user. Everything is bounded by ctx.
func Dial(ctx context.Context, path string) (*Conn, error) {
	d := net.Dialer{}
	nc, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("exec socket %s: %w: %w", path, ErrNotStarted, err)
	}
	uid, pid, err := execsocket.PeerCredentials(nc)
	if err == nil && !execsocket.TrustedUID(uid) {
		err = fmt.Errorf("%w: served by pid %d as uid %d, not root", execsocket.ErrUntrustedSocket, pid, uid)
	}
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("exec socket %s: %w: %w", path, ErrNotStarted, err)
	}
	c := &Conn{
		path: path, nc: nc, peerPID: int(pid),
		bw: bufio.NewWriterSize(nc, 2*maxFrame), nextID: 1, streams: map[uint32]*stream{},
		sendConn: defaultWindow, initWin: defaultWindow, maxSend: maxFrame, done: make(chan struct{}),
	}
	c.cond = sync.NewCond(&c.mu)
	c.henc = hpack.NewEncoder(&c.hbuf)
	if dl, ok := ctx.Deadline(); ok {
		nc.SetWriteDeadline(dl)
	}
	c.wmu.Lock()
	c.bw.WriteString("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
	settings := make([]byte, 6)
	binary.BigEndian.PutUint16(settings, settingInitialWindowSize)
	binary.BigEndian.PutUint32(settings[2:], recvWindow)
	c.writeFrameLocked(frameSettings, 0, 0, settings)
	c.writeFrameLocked(frameWindowUpdate, 0, 0, u32(recvWindow-defaultWindow))
	err = c.bw.Flush()
	c.wmu.Unlock()
	nc.SetWriteDeadline(time.Time{})
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("exec socket %s: %w: %w", path, ErrNotStarted, err)
	}
	go c.readLoop()
	return c, nil
}

var _ execsocket.Conn = (*Conn)(nil)

// PeerPID returns the process serving the socket, as SO_PEERCRED gave it:
// 0 when it is not visible in the caller's PID namespace.
func (c *Conn) PeerPID() int { return c.peerPID }

// Close closes the connection; a call in progress fails.
func (c *Conn) Close() error {
	err := c.nc.Close()
	<-c.done
	return err
}

func u32(v uint32) []byte {
	b := make([]byte, 4)
	binary.BigEndian.PutUint32(b, v)
	return b
}

// writeFrameLocked buffers one frame; c.wmu is held.
func (c *Conn) writeFrameLocked(typ, flags byte, id uint32, payload []byte) {
	var h [9]byte
	h[0], h[1], h[2] = byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
	h[3], h[4] = typ, flags
	binary.BigEndian.PutUint32(h[5:], id&0x7fffffff)
	c.bw.Write(h[:])
	c.bw.Write(payload)
}

// writeFrames writes frames at once.
func (c *Conn) writeFrame(typ, flags byte, id uint32, payload []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.writeFrameLocked(typ, flags, id, payload)
	return c.bw.Flush()
}

// open starts a call of method and returns its stream.
func (c *Conn) open(method string, timeout time.Duration) (*stream, error) {
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return nil, err
	}
	s := &stream{id: c.nextID, sendWin: c.initWin, in: make(chan event, 64), gone: make(chan struct{})}
	c.nextID += 2
	c.streams[s.id] = s
	c.mu.Unlock()

	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.hbuf.Reset()
	for _, f := range [][2]string{
		{":method", "POST"}, {":scheme", "http"}, {":path", method}, {":authority", "localhost"},
		{"content-type", "application/grpc"}, {"te", "trailers"},
	} {
		c.henc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if timeout > 0 {
		c.henc.WriteField(hpack.HeaderField{Name: "grpc-timeout", Value: strconv.FormatInt(max(1, timeout.Milliseconds()), 10) + "m"})
	}
	if c.hbuf.Len() > maxFrame {
		return nil, errors.New("request headers too large")
	}
	c.writeFrameLocked(frameHeaders, flagEndHeaders, s.id, c.hbuf.Bytes())
	return s, c.bw.Flush()
}

// send sends one gRPC message on s, waiting for the service's window;
// endStream half-closes the call.
func (c *Conn) send(ctx context.Context, s *stream, msg []byte, endStream bool) error {
	data := make([]byte, 5+len(msg))
	binary.BigEndian.PutUint32(data[1:], uint32(len(msg)))
	copy(data[5:], msg)
	// A wait for window ends with ctx too.
	stop := context.AfterFunc(ctx, func() {
		c.mu.Lock()
		c.cond.Broadcast()
		c.mu.Unlock()
	})
	defer stop()
	for len(data) > 0 {
		c.mu.Lock()
		for c.err == nil && !s.ended && ctx.Err() == nil && (c.sendConn <= 0 || s.sendWin <= 0) {
			c.cond.Wait()
		}
		switch {
		case c.err != nil:
			err := c.err
			c.mu.Unlock()
			return err
		case s.ended:
			c.mu.Unlock()
			return io.EOF // the service ended the call: its status says why
		case ctx.Err() != nil:
			c.mu.Unlock()
			return ctx.Err()
		}
		n := int(min(int64(len(data)), c.sendConn, s.sendWin, int64(c.maxSend)))
		c.sendConn -= int64(n)
		s.sendWin -= int64(n)
		c.mu.Unlock()
		var flags byte
		if n == len(data) && endStream {
			flags = flagEndStream
		}
		if err := c.writeFrame(frameData, flags, s.id, data[:n]); err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

// recv returns the next message of s, or how the call ended.
func (c *Conn) recv(ctx context.Context, s *stream) ([]byte, *callEnd, error) {
	select {
	case ev := <-s.in:
		if ev.n > 0 {
			c.grant(s, ev.n)
		}
		return ev.msg, ev.end, nil
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
}

// grant gives the service back n bytes of window on s and the connection.
func (c *Conn) grant(s *stream, n int) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.writeFrameLocked(frameWindowUpdate, 0, 0, u32(uint32(n)))
	c.mu.Lock()
	open := !s.ended
	c.mu.Unlock()
	if open {
		c.writeFrameLocked(frameWindowUpdate, 0, s.id, u32(uint32(n)))
	}
	c.bw.Flush()
}

// cancel resets s: the service cancels the call.
func (c *Conn) cancel(s *stream) {
	c.writeFrame(frameRSTStream, 0, s.id, u32(errCodeCancel))
	c.forget(s)
}

// forget drops s, which its caller no longer reads.
func (c *Conn) forget(s *stream) {
	c.mu.Lock()
	delete(c.streams, s.id)
	if !s.ended {
		s.ended = true
	}
	select {
	case <-s.gone:
	default:
		close(s.gone)
	}
	c.cond.Broadcast()
	c.mu.Unlock()
}

// deliver hands ev to s's caller unless it gave the call up.
func (s *stream) deliver(ev event) {
	select {
	case s.in <- ev:
	case <-s.gone:
	}
}

// readLoop reads frames until the connection fails or closes.
func (c *Conn) readLoop() {
	defer close(c.done)
	err := c.read()
	c.mu.Lock()
	if c.err == nil {
		c.err = fmt.Errorf("exec socket %s: %w", c.path, err)
	}
	for id, s := range c.streams {
		if !s.ended {
			s.ended = true
			go s.deliver(event{end: &callEnd{err: c.err}})
		}
		delete(c.streams, id)
	}
	c.cond.Broadcast()
	c.mu.Unlock()
}

func (c *Conn) read() error {
	br := bufio.NewReaderSize(c.nc, 2*maxFrame)
	hdec := hpack.NewDecoder(4096, nil)
	var hdr [9]byte
	var block []byte   // a header block being assembled
	var blockID uint32 // its stream
	var blockEnd bool  // its END_STREAM
	payload := make([]byte, maxFrame)
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return err
		}
		length := int(hdr[0])<<16 | int(hdr[1])<<8 | int(hdr[2])
		typ, flags := hdr[3], hdr[4]
		id := binary.BigEndian.Uint32(hdr[5:]) & 0x7fffffff
		if length > maxFrame {
			return fmt.Errorf("frame of %d bytes, over the %d advertised", length, maxFrame)
		}
		p := payload[:length]
		if _, err := io.ReadFull(br, p); err != nil {
			return err
		}
		if block != nil && typ != frameContinuation {
			return errors.New("header block interrupted")
		}
		switch typ {
		case frameData:
			data, err := unpad(flags, p)
			if err != nil {
				return err
			}
			if err := c.onData(id, data, length, flags&flagEndStream != 0); err != nil {
				return err
			}
		case frameHeaders:
			frag, err := unpad(flags, p)
			if err != nil {
				return err
			}
			if flags&flagPriority != 0 {
				if len(frag) < 5 {
					return errors.New("short HEADERS frame")
				}
				frag = frag[5:]
			}
			block, blockID, blockEnd = append([]byte{}, frag...), id, flags&flagEndStream != 0
			if flags&flagEndHeaders == 0 {
				continue
			}
			fallthrough
		case frameContinuation:
			if typ == frameContinuation {
				if block == nil || id != blockID {
					return errors.New("unexpected CONTINUATION frame")
				}
				block = append(block, p...)
				if len(block) > maxHeaderBlock {
					return errors.New("header block too large")
				}
				if flags&flagEndHeaders == 0 {
					continue
				}
			}
			fields, err := hdec.DecodeFull(block)
			block = nil
			if err != nil {
				return fmt.Errorf("headers: %w", err)
			}
			c.onHeaders(blockID, fields, blockEnd)
		case frameRSTStream:
			if len(p) != 4 {
				return errors.New("bad RST_STREAM frame")
			}
			c.end(id, &callEnd{err: fmt.Errorf("the service reset the call (HTTP/2 error %d)", binary.BigEndian.Uint32(p))})
		case frameSettings:
			if flags&flagAck != 0 {
				continue
			}
			if err := c.onSettings(p); err != nil {
				return err
			}
			if err := c.writeFrame(frameSettings, flagAck, 0, nil); err != nil {
				return err
			}
		case framePing:
			if flags&flagAck == 0 {
				if err := c.writeFrame(framePing, flagAck, 0, p); err != nil {
					return err
				}
			}
		case frameGoAway:
			if len(p) < 8 {
				return errors.New("bad GOAWAY frame")
			}
			c.mu.Lock()
			c.goAway, c.gotGoAway = binary.BigEndian.Uint32(p)&0x7fffffff, true
			c.mu.Unlock()
			// Calls the service never saw did not start.
			c.mu.Lock()
			var gone []uint32
			for sid := range c.streams {
				if sid > c.goAway {
					gone = append(gone, sid)
				}
			}
			c.mu.Unlock()
			for _, sid := range gone {
				c.end(sid, &callEnd{status: codeUnavailable, message: "the service is going away"})
			}
		case frameWindowUpdate:
			if len(p) != 4 {
				return errors.New("bad WINDOW_UPDATE frame")
			}
			inc := int64(binary.BigEndian.Uint32(p) & 0x7fffffff)
			c.mu.Lock()
			if id == 0 {
				c.sendConn += inc
			} else if s := c.streams[id]; s != nil {
				s.sendWin += inc
			}
			c.cond.Broadcast()
			c.mu.Unlock()
		case framePushPromise:
			return errors.New("unexpected PUSH_PROMISE")
		}
	}
}

// unpad strips a padded frame's padding.
func unpad(flags byte, p []byte) ([]byte, error) {
	if flags&flagPadded == 0 {
		return p, nil
	}
	if len(p) < 1 || int(p[0]) > len(p)-1 {
		return nil, errors.New("bad padding")
	}
	return p[1 : len(p)-int(p[0])], nil
}

func (c *Conn) onSettings(p []byte) error {
	if len(p)%6 != 0 {
		return errors.New("bad SETTINGS frame")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for ; len(p) > 0; p = p[6:] {
		v := binary.BigEndian.Uint32(p[2:])
		switch binary.BigEndian.Uint16(p) {
		case settingInitialWindowSize:
			delta := int64(v) - c.initWin
			c.initWin = int64(v)
			for _, s := range c.streams {
				s.sendWin += delta
			}
		case settingMaxFrameSize:
			c.maxSend = int(min(v, maxFrame))
		}
	}
	c.cond.Broadcast()
	return nil
}

// onData splits a stream's data into gRPC messages for its caller.
func (c *Conn) onData(id uint32, data []byte, length int, endStream bool) error {
	c.mu.Lock()
	s := c.streams[id]
	c.mu.Unlock()
	if s == nil {
		// A call already over: grant the connection window back anyway.
		if length > 0 {
			c.writeFrame(frameWindowUpdate, 0, 0, u32(uint32(length)))
		}
		return nil
	}
	s.buf = append(s.buf, data...)
	grant := length
	for len(s.buf) >= 5 {
		if s.buf[0] != 0 {
			return errors.New("compressed message, which was not asked for")
		}
		n := int(binary.BigEndian.Uint32(s.buf[1:]))
		if n > maxMessage {
			return fmt.Errorf("message of %d bytes, over %d", n, maxMessage)
		}
		if len(s.buf) < 5+n {
			break
		}
		msg := append([]byte(nil), s.buf[5:5+n]...)
		s.buf = s.buf[5+n:]
		s.deliver(event{msg: msg, n: grant})
		grant = 0
	}
	if grant > 0 {
		// Part of a message: grant it now, the message is bounded.
		c.grant(s, grant)
	}
	if endStream {
		c.end(id, &callEnd{err: errors.New("the service ended the call without a status")})
	}
	return nil
}

// onHeaders handles response headers, and trailers, which end the call.
func (c *Conn) onHeaders(id uint32, fields []hpack.HeaderField, endStream bool) {
	var status, message, grpcStatus string
	for _, f := range fields {
		switch f.Name {
		case ":status":
			status = f.Value
		case "grpc-status":
			grpcStatus = f.Value
		case "grpc-message":
			message = decodeGRPCMessage(f.Value)
		}
	}
	if status != "" && status != "200" {
		c.end(id, &callEnd{err: fmt.Errorf("the service answered HTTP status %s", status)})
		return
	}
	if grpcStatus != "" {
		code, err := strconv.Atoi(grpcStatus)
		if err != nil {
			c.end(id, &callEnd{err: fmt.Errorf("bad grpc-status %q", grpcStatus)})
			return
		}
		c.end(id, &callEnd{status: code, message: message})
		return
	}
	if endStream {
		c.end(id, &callEnd{err: errors.New("the service ended the call without a status")})
	}
}

// end ends the call id with e, once.
func (c *Conn) end(id uint32, e *callEnd) {
	c.mu.Lock()
	s := c.streams[id]
	if s == nil || s.ended {
		c.mu.Unlock()
		return
	}
	s.ended = true
	delete(c.streams, id)
	c.cond.Broadcast()
	c.mu.Unlock()
	s.deliver(event{end: e})
}

// decodeGRPCMessage undoes the percent-encoding of grpc-message.
func decodeGRPCMessage(s string) string {
	var b []byte
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				b = append(b, byte(v))
				i += 2
				continue
			}
		}
		b = append(b, s[i])
	}
	return string(b)
}
